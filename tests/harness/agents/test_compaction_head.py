"""What a compaction keeps: a head the next runs re-send from the prefix cache.

A PR session's first turn carries the whole diff; later turns carry small interdiffs. A
compaction that summarized everything but the newest ``keep_recent_turns`` left a head of a few
hundred tokens, so the next run's new message (paid uncached every run) was a large share of
its request. Summarizing only down to ``compaction.target`` keeps the head big, and the runs
after it hit the cache as they did before.
"""

from __future__ import annotations

from dsh_harness.sessions.events import Compaction, TurnStart
from dsh_harness.testing import ModelRequest, Reply, ScriptedModelServer, is_compaction_request
from tests.harness.agent_kit import make_harness

BUDGET = 6000


def _policy(req: ModelRequest) -> Reply:
    if is_compaction_request(req):
        return Reply(content="SUMMARY: the first review's findings, with paths and lines.")
    return Reply(content="No findings.")


async def test_runs_after_a_compaction_hit_the_cache_like_runs_before_it(tmp_path):
    with ScriptedModelServer(policy=_policy) as server:
        h = make_harness(tmp_path, server.base_url,
                         extra=f"[compaction]\nmax_prompt_tokens = {BUDGET}\n")
        agent = await h.agents.create("test:pr")
        firsts = []   # (turn, served request) of each turn's first model request
        # Turn 1: the whole diff (~2,500 tokens); then one small interdiff per run.
        messages = ["whole diff\n" + "+ line of code\n" * 700]
        messages += [f"run {i}: interdiff\n" + f"+ changed line {i}\n" * 30 for i in range(30)]
        for text in messages:
            n = len(server.served)
            assert (await agent.followup(text)).ok
            chat = [s for s in server.served[n:]
                    if not is_compaction_request(s.request)]
            firsts.append(chat[0])
        await h.close()
    ran_in, turn = [], 0
    for e in agent.session.events:
        if isinstance(e, TurnStart):
            turn = e.turn
        elif isinstance(e, Compaction):
            ran_in.append(turn)
    assert len(ran_in) == 1, ran_in   # one compaction in the 31 runs
    after = firsts[ran_in[0]:]       # the first requests of the runs after it (turn n: index n-1)
    assert len(after) >= 5
    hits = [round(100 * s.cache_hit_tokens / s.prompt_tokens, 1) for s in after]
    assert min(hits) >= 90, hits
