"""End-to-end kit: the real github-mcp-server, the sandbox GitHub, the scripted reviewer model,
and the real poller/runner/harness. A "restart" is a new Harness over the same home."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_github_reviewer.app import ReviewerApp
from dsh_github_reviewer.cursor import DOMAIN, CursorStore
from dsh_github_reviewer.poller import AccountPoller
from dsh_github_reviewer.runner import Runner
from dsh_github_reviewer.testing import SandboxGitHub
from dsh_github_reviewer.testing.scenario import REPO, build_shop, deployment_toml, model_server
from dsh_harness import Harness, parse_config


class Deployment:
    def __init__(self, tmp: Path, sb: SandboxGitHub, model, **toml_kw):
        self.tmp, self.sb, self.model, self.toml_kw = tmp, sb, model, toml_kw
        self.harness: Harness | None = None
        self.pollers: dict[str, AccountPoller] = {}

    def toml(self) -> str:
        return deployment_toml(self.tmp / "home", self.sb, self.model, **self.toml_kw)

    def write_config(self) -> Path:
        path = self.tmp / "dsh.toml"
        path.write_text(self.toml())
        return path

    async def start(self) -> Deployment:
        self.harness = Harness(parse_config(self.toml(), "dsh.toml", self.tmp))
        app = ReviewerApp.of(self.harness)
        await app.connect()
        runner = Runner(self.harness, app)
        self.pollers = {k: AccountPoller(app, a, runner) for k, a in app.accounts.items()}
        return self

    async def stop(self) -> None:
        if self.harness is not None:
            await ReviewerApp.of(self.harness).close()
            await self.harness.close()
            self.harness = None

    async def restart(self) -> Deployment:
        await self.stop()
        return await self.start()

    async def tick(self, account: str = "demo") -> None:
        await self.pollers[account].tick()

    async def entry(self, number: int = 1, account: str = "demo"):
        domain = await self.harness.storage.domain(DOMAIN)
        return (await CursorStore(domain, account).load()).prs.get(f"{REPO}#{number}")

    async def cursor(self, account: str = "demo"):
        domain = await self.harness.storage.domain(DOMAIN)
        return await CursorStore(domain, account).load()

    def reviews(self, number: int = 1):
        return self.sb.state.reviews_of(REPO, number)

    def bot_comments(self, number: int = 1):
        return [c for c in self.sb.state.issue_comments_of(REPO, number)
                if c.user == "shop-review-bot"]


@pytest.fixture
def sandbox80():
    with SandboxGitHub.on_loopback_80() as sb:
        yield sb


@pytest.fixture
def model():
    with model_server() as m:
        yield m


@pytest.fixture
async def shop(tmp_path, sandbox80, model):
    build_shop(sandbox80)
    dep = await Deployment(tmp_path, sandbox80, model).start()
    yield dep
    await dep.stop()
