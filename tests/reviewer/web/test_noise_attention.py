"""Noise figures per repository and the needs-a-maintainer view over a scripted history whose
figures were counted by hand; the Chromium check is in
test_browser_noise.py."""

from __future__ import annotations

import re

from tests.reviewer.web.noise_history import API, ATTENTION, SHOP, build_history
from tests.reviewer.web.test_pr_pages import account_harness, client, server  # noqa: F401  (fixture)


def subset(got: dict, want: dict) -> dict:
    return {k: got.get(k) for k in want}


async def test_repository_figures_equal_the_hand_count(tmp_path, server):  # noqa: F811
    h = account_harness(tmp_path, server)
    try:
        await build_history(h)
        async with client(h) as c:
            repos = (await c.get("/api/github-reviewer/prs")).json()["repositories"]
            assert subset(repos["acme/shop"]["noise"], SHOP) == SHOP
            assert subset(repos["acme/api"]["noise"], API) == API
            shop = repos["acme/shop"]["noise"]
            assert shop["findings_per_pr"] == round(5 / 3, 2)
            assert shop["cost_per_fixed_usd"] == round(repos["acme/shop"]["usage"][3], 6)
            assert sum(c[0] for c in shop["days"].values()) == 5
            page = (await c.get("/repository", params={"name": "acme/shop"})).text
            cells = dict(re.findall(r'id="noise-(\w+)">(\d+)<', page))
            assert cells == {"posted": "5", "fixed": "1", "dismissed": "1", "open": "3"}
            assert "20.0%" in page and "60.0%" in page
            assert (await c.get("/repository", params={"name": "nope/x"})).status_code == 404
            listing = (await c.get("/prs")).text
            assert '<td class="num" data-label="Fixed">1 (20.0%)</td>' in listing
        # `dsh github-reviewer status --json` carries the same figures.
        import argparse
        import contextlib
        import io
        import json

        from dsh_github_reviewer.cli import cmd_status

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert await cmd_status(h, argparse.Namespace(json=True)) == 0
        noise = json.loads(out.getvalue())[0]["noise"]
        assert subset(noise["acme/shop"], SHOP) == SHOP and subset(noise["acme/api"], API) == API
        assert noise["acme/shop"]["cost_usd"] == round(repos["acme/shop"]["usage"][3], 6)
    finally:
        await h.close()


async def test_needs_a_maintainer_lists_exactly_the_right_prs(tmp_path, server):  # noqa: F811
    h = account_harness(tmp_path, server)
    try:
        await build_history(h)
        async with client(h) as c:
            data = (await c.get("/api/github-reviewer/attention")).json()
            got = {(p["repo"], p["number"]): p["reasons"] for p in data["prs"]}
            assert got == ATTENTION
            assert data["by_repository"]["acme/shop"]["open_critical"] == 1
            assert data["by_repository"]["acme/api"]["paused"] == 1
            for params, numbers in (({"reason": "critical"}, {2}), ({"repo": "acme/api"}, {3, 4}),
                                    ({"q": "502"}, {3}), ({"q": "paused maintainer"}, {4}),
                                    ({"reason": "paused", "repo": "acme/shop"}, {6})):
                data = (await c.get("/api/github-reviewer/attention", params=params)).json()
                assert {p["number"] for p in data["prs"]} == numbers, params
            page = (await c.get("/attention")).text
            assert set(re.findall(r'data-pr="([^"]+)"', page)) == {
                f"{r}#{n}" for r, n in ATTENTION}
    finally:
        await h.close()
