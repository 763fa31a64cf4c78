"""A deployment of the reviewer wired to the sandbox GitHub and the scripted model, driven tick
by tick. Used by the end-to-end tests, the benchmarks and the demo: a "restart" is a new
Harness over the same home directory, as after a process restart."""

from __future__ import annotations

from pathlib import Path

from dsh_harness import Harness, parse_config

from ..app import ReviewerApp
from ..cursor import DOMAIN, CursorStore
from ..poller import AccountPoller
from ..runner import Runner
from .sandbox import SandboxGitHub
from .scenario import REPO, deployment_toml


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
