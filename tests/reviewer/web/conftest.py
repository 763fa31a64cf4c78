"""A deployment that produced real sessions (with hostile text in them), served by `dsh web`
in its own process over the same home directory, and a Chromium driven by Playwright."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.deployment import Deployment
from dsh_github_reviewer.testing.reviewer_model import reviewer_policy
from dsh_github_reviewer.testing.scenario import BOT_TOKEN, REPO, build_shop
from dsh_harness.testing import Reply, ScriptedModelServer

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = Path(os.environ.get("DSH_ARTIFACTS", ROOT / "artifacts")) / "screenshots"
WEB_TOKEN = "dsh-web-token-" + "Wq7xR2mK9pL4vN8zT3cJ6hB5"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

TITLE = "Fix <script>alert('title')</script> & more"
BODY = ("<img src=x onerror=alert('body')> [click me](javascript:alert('link')) "
        "<iframe src=\"http://127.0.0.9:9/evil\"></iframe>")
FILE = "<p>hello</p>\n<script>alert('file')</script>\n<img src=x onerror=alert('img')>\n"
BOT = "/bot <svg onload=alert('bot')> what about **this** and [x](javascript:alert('md'))?"


def policy(req):
    if "Flow: review" in req.last_user_text() and "number: 2" in req.last_user_text():
        return Reply(content="I decline to review this one.")  # no submission: a failure
    return reviewer_policy(req)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, tmp: Path, base_url: str, config: Path, sb: SandboxGitHub):
        self.tmp, self.base_url, self.config, self.sb = tmp, base_url, config, sb


async def produce(tmp: Path, sb: SandboxGitHub, model: ScriptedModelServer) -> Path:
    build_shop(sb, prs=2)
    st = sb.state
    pr = st.pull(REPO, 1)
    pr.title, pr.body = TITLE, BODY
    st.commit(REPO, "feature-1", {"web/page.html": FILE})
    # A long poll interval keeps PR 2's backoff (2 x interval) in the future for the tests.
    dep = await Deployment(tmp, sb, model, poll_interval_s=300).start()
    try:
        await dep.tick()
        st.add_issue_comment(REPO, 1, "maintainer", BOT)
        await dep.tick()
    finally:
        await dep.stop()
    port = free_port()
    config = tmp / "dsh.toml"
    config.write_text(_with_web(dep.toml(), port))
    return config


def _with_web(toml: str, port: int) -> str:
    # [web] must precede the [plugins...] tables it would otherwise be read into.
    head, sep, tail = toml.partition("[plugins.github-reviewer]")
    return f'{head}[web]\nport = {port}\nauth_token = "{WEB_TOKEN}"\n\n{sep}{tail}'


@pytest.fixture(scope="module")
def served():
    import asyncio

    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: scripts/install-browser installs it")
    with tempfile.TemporaryDirectory() as tmp, SandboxGitHub.on_loopback_80() as sb, \
            ScriptedModelServer(policy=policy) as model:
        # In a thread of its own: Playwright's sync API may already run a loop in this one.
        with ThreadPoolExecutor(1) as pool:
            config = pool.submit(asyncio.run, produce(Path(tmp), sb, model)).result()
        port = int(config.read_text().split("port = ")[1].split("\n")[0])
        with dsh_web(config, Path(tmp), port) as url:
            yield Served(Path(tmp), url, config, sb)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, served):
    """A signed-in page that records dialogs and every request leaving the UI's origin."""
    context = browser.new_context()
    page = context.new_page()
    page.dialogs, page.foreign, page.failed = [], [], []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("response", lambda r: page.failed.append(f"{r.status} {r.url}")
            if r.status >= 400 else None)
    page.on("request", lambda r: None if r.url.startswith(served.base_url)
            else page.foreign.append(r.url))
    page.goto(served.base_url + "/login")
    page.fill("input[name=token]", WEB_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(served.base_url + "/")
    yield page
    context.close()


__all__ = ["ARTIFACTS", "BOT_TOKEN", "WEB_TOKEN"]


@contextlib.contextmanager
def dsh_web(config: Path, cwd: Path, port: int) -> Iterator[str]:
    """``dsh web`` on ``config`` in a process of its own, once its port accepts connections;
    its URL. Stopped on the way out."""
    proc = subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config", str(config),
                             "web"], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "dsh web did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
