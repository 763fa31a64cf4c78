"""``--judge provider/model``: an LLM checks that a finding describes the defect it sits near.

The location rule only says a comment sits near a defect; the judge reads the comment and the
defect's one-sentence description and answers YES or NO, for every pair the location rule allows
(``score.candidate_pairs``). The report then scores twice: by location alone, and with only the
pairs the judge confirmed (``score_case(..., confirmed=verdicts)``), side by side. The comment is
model output, so it is sanitized before it goes into the judge's prompt.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import openai

from dsh_harness import DeploymentConfig

from ..core.sanitizer import sanitize
from .cases import Case
from .run import ConfigResult
from .score import candidate_pairs, pair_key

SYSTEM = ("You grade code review comments. You get a known defect and one review comment made "
          "near it. Answer YES if the comment points out that defect (in any words), NO if it "
          "is about something else. Answer with one word.")


def _client(base: DeploymentConfig, provider: str) -> openai.AsyncOpenAI:
    pc = base.providers[provider]
    key = (pc.api_key.get_secret_value() if pc.api_key is not None
           else os.environ.get(pc.api_key_env or "", "")) or "none"
    return openai.AsyncOpenAI(base_url=pc.base_url, api_key=key, timeout=pc.timeout_s,
                              max_retries=pc.max_retries)


async def _ask(client: openai.AsyncOpenAI, model: str, defect: str, comment: str
               ) -> dict[str, Any]:
    try:
        resp = await client.chat.completions.create(model=model, messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Defect: {defect}\n\n<comment>\n{sanitize(comment)}\n"
                                        "</comment>"}])
    except openai.OpenAIError as exc:
        return {"describes": None, "error": type(exc).__name__}
    answer = (resp.choices[0].message.content or "").strip()
    word = answer.split()[0].strip(".!").upper() if answer else ""
    return {"describes": True if word == "YES" else False if word == "NO" else None,
            "answer": answer[:200]}


async def judge_results(base: DeploymentConfig, ref: str, cases: list[Case],
                        results: list[ConfigResult]) -> dict[str, dict[str, Any]]:
    """config label -> ``pair_key`` -> verdict, for every (finding, defect) pair the location
    rule allows (a pair asked once per configuration, whatever the repeat)."""
    provider, _, model = ref.partition("/")
    by_id = {c.id: c for c in cases}
    client = _client(base, provider)
    gate = asyncio.Semaphore(4)
    out: dict[str, dict[str, Any]] = {}

    async def one(label: str, key: str, defect: str, comment: str) -> None:
        async with gate:
            out[label][key] = await _ask(client, model, defect, comment)

    try:
        jobs = []
        for res in results:
            out[res.config.label] = {}
            asked: set[str] = set()
            for run in res.runs:
                for f, d in candidate_pairs(by_id[run.case_id], run):
                    key = pair_key(run.case_id, f, d.id)
                    if key not in asked:
                        asked.add(key)
                        jobs.append(one(res.config.label, key, d.description, f.body))
        await asyncio.gather(*jobs)
    finally:
        await client.close()
    return out
