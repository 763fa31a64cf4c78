"""The daemon with `review.team`: the same team as CI mode, hooked in where a review turn is
run, with the real poller, github-mcp-server, sandbox GitHub and the scripted team."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.session_key import PrKey
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.scenario import build_shop, push_fix
from dsh_github_reviewer.testing.team_model import TeamModel
from dsh_harness.testing import ScriptedModelServer

pytestmark = pytest.mark.slow
TEAM = '''
[plugins.github-reviewer.accounts.review.team]
personas = ["quality", "security", "performance"]
'''


async def test_daemon_team_reviews_then_resumes_every_session(tmp_path, sandbox80):
    build_shop(sandbox80)
    with ScriptedModelServer(policy=TeamModel()) as model:
        dep = await Deployment(tmp_path, sandbox80, model, extra_account=TEAM).start()
        try:
            await dep.tick()
            (review,) = dep.reviews()
            assert "Verdict: cannot merge: " in review.body
            ids = {PrKey("demo", "acme", "shop", 1, p).session_id
                   for p in ("quality", "security", "performance", "coordinator")}
            summaries = {s.id: s for s in await dep.harness.sessions.summaries()}
            assert set(summaries) == ids, "no single-reviewer session next to the team"
            assert summaries[PrKey("demo", "acme", "shop", 1, "security").session_id].title \
                == "Review acme/shop PR 1 · security"
            assert (await dep.entry()).status == "reviewed"
            served = len(model.served)

            push_fix(sandbox80)
            await dep.restart()
            await dep.tick()
            assert len(dep.reviews()) == 2
            seen: set[str] = set()
            for s in model.served[served:]:
                system = s.request["messages"][0]["content"]
                if system in seen:
                    continue
                seen.add(system)
                assert len(s.request["messages"]) > 3, "resumed, not a new conversation"
                assert s.cache_hit_tokens / s.prompt_tokens > 0.5
            assert len(seen) == 4
        finally:
            await dep.stop()
