"""The second look's price: review 1 and review 2 (after a push) of the shop
PR through the real loop, with ``review.verify`` off and on. Per session (the review's and the
verifier's): input tokens, share cached, cost; and whether the review session's requests are
byte-identical with and without the verifier.

Real poller, runner, guarded tools and github-mcp-server against the sandbox GitHub; the
scripted reviewer drafts the shop's three findings and the scripted verifier drops one and
lowers one (``testing/reviewer_model.py``); tokens are reported the way DeepSeek does, with the
server's prefix-cache simulator. Two instruction sizes: the shop's one-line instructions (a
toy) and ~6 KB of rules, as real repositories have. Prints a table; asserts nothing.

    python bench/second_look.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from dsh_github_reviewer.core.session_key import PrKey
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import REPO, build_shop, model_server, push_fix

REVIEW = PrKey("demo", "acme", "shop", 1).session_id
VERIFIER = PrKey("demo", "acme", "shop", 1, "verifier").session_id
RULES = "\n".join(
    f"- Rule {i}: {topic} must be checked in every changed module; explain the risk and the "
    "fix in one or two sentences, cite the line, and do not report style nits here."
    for i, topic in enumerate(["SQL parameterization", "input validation", "error handling",
                               "resource cleanup", "logging of secrets", "TLS settings",
                               "bounds of loops and slices", "time zones", "retries",
                               "concurrency of shared state", "API compatibility",
                               "test coverage of changed behaviour"] * 3, 1))


async def per_turn(dep: Deployment, sid: str) -> list[tuple[int, int, float]]:
    """(input tokens, cached tokens, cost) of each turn of a session."""
    assert dep.harness is not None
    try:
        log = await dep.harness.sessions.read(sid)
    except Exception:
        return []
    turns: dict[int, list[float]] = {}
    for e in log.events:
        if e.type == "assistant_message" and e.usage is not None:
            t = turns.setdefault(e.turn, [0, 0, 0.0])
            t[0] += e.usage.prompt
            t[1] += e.usage.cache_read
            t[2] += e.usage.cost_usd
    return [(int(a), int(b), c) for _, (a, b, c) in sorted(turns.items())]


async def run(verify: bool, long_rules: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            model_server() as model:
        build_shop(sb)
        if long_rules:
            sb.state.commit(REPO, "main", {".github/review_instructions.md":
                                           "# Review instructions\n" + RULES + "\n"})
        dep = await Deployment(Path(tmp), sb, model,
                               extra_account="review.verify = true\n" if verify else "").start()
        try:
            await dep.tick()
            first_review = [json.dumps(s.request, sort_keys=True).replace(sb.host, "SB")
                            for s in model.served
                            if s.request["messages"][0]["content"].startswith(
                                "You are dsh-github-reviewer")]
            push_fix(sb)
            await dep.tick()
            inline = sum(len(sb.state.comments_of_review(r.id)) for r in dep.reviews())
            return {"review": await per_turn(dep, REVIEW),
                    "verifier": await per_turn(dep, VERIFIER),
                    "first_review_requests": first_review, "inline": inline}
        finally:
            await dep.stop()


def fmt(turns: list[tuple[int, int, float]], i: int) -> str:
    if i >= len(turns):
        return "—"
    tokens, cached, cost = turns[i]
    return f"{tokens:>6} in, {100 * cached / tokens if tokens else 0:3.0f} % cached, ${cost:.5f}"


async def main() -> None:
    print("| instructions | verify | session | review 1 | review 2 (push) | inline findings |")
    print("|---|---|---|---|---|---|")
    for long_rules in (False, True):
        size = "~6 KB rules" if long_rules else "one line (toy)"
        off = await run(False, long_rules)
        on = await run(True, long_rules)
        for name, res in (("off", off), ("on", on)):
            for session in ("review", "verifier"):
                if session == "verifier" and name == "off":
                    continue
                t = res[session]
                print(f"| {size} | {name} | {session} | {fmt(t, 0)} | {fmt(t, 1)} | "
                      f"{res['inline'] if session == 'review' else ''} |")
        same = off["first_review_requests"] == on["first_review_requests"]
        print(f"| {size} | | review 1 requests byte-identical off vs on: "
              f"{'yes' if same else 'NO'} ({len(on['first_review_requests'])} requests) | | | |")


if __name__ == "__main__":
    asyncio.run(main())
