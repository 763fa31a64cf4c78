"""A deployment of the reviewer wired to the sandbox GitHub and the scripted model, driven tick
by tick. Used by the end-to-end tests, the benchmarks and the demo: a "restart" is a new
Harness over the same home directory, as after a process restart."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from dsh_harness import Harness, LoadedConfig, parse_config

from ..app import ReviewerApp
from ..app.service import WorkService
from ..core.clock import utcnow
from ..core.session_key import PrRef
from ..core.triggers import SUMMARY_MARKER
from ..reviewers.base import Reviewer
from ..sources.poll import AccountPoller
from ..work.records import DOMAIN
from ..work.store import WorkStore
from .sandbox import SandboxGitHub
from .scenario import BOT_LOGIN, REPO, deployment_toml


class Deployment:
    # Started and not yet stopped, in this process: a test that fails before its own stop()
    # leaves one running (its MCP processes, HTTP clients, store connections), and the test
    # kit's cleanup fixture stops it (``left_running``) instead of letting it hang the run.
    _running: ClassVar[list[Deployment]] = []

    @classmethod
    def left_running(cls) -> list[Deployment]:
        return list(cls._running)

    def __init__(self, tmp: Path, sb: SandboxGitHub, model, clock=None,
                 loaded: LoadedConfig | None = None, **toml_kw):
        # ``clock`` (optional): what the work records and the scheduler take as now, so a
        # test can move past a backoff without sleeping through it. ``loaded``: a config to
        # run instead of the scripted model's (the eval runs the user's providers).
        self.tmp, self.sb, self.model, self.toml_kw = tmp, sb, model, toml_kw
        self.loaded = loaded
        self.clock = clock
        self.harness: Harness | None = None
        self.pollers: dict[str, AccountPoller] = {}
        self.work: WorkService | None = None

    def toml(self) -> str:
        return deployment_toml(self.tmp / "home", self.sb, self.model, **self.toml_kw)

    def write_config(self) -> Path:
        path = self.tmp / "dsh.toml"
        path.write_text(self.toml())
        return path

    async def start(self) -> Deployment:
        self.harness = Harness(self.loaded or parse_config(self.toml(), "dsh.toml", self.tmp))
        Deployment._running.append(self)
        try:
            app = ReviewerApp.of(self.harness)
            await app.connect()
            self.work = app.build_work(self.clock or utcnow)
            self.pollers = self.work.pollers
        except BaseException:
            await self.stop()   # half started: what did start is closed again
            raise
        return self

    @property
    def runner(self) -> Reviewer:
        """The first account's reviewer (the one its PR work calls; tests wrap its methods)."""
        assert self.harness is not None
        return next(iter(ReviewerApp.of(self.harness).reviewers.values()))

    async def stop(self, grace_s: float = 60.0) -> None:
        if self in Deployment._running:
            Deployment._running.remove(self)
        if self.work is not None:
            await self.work.stop(grace_s)
            self.work = None
        if self.harness is not None:
            await ReviewerApp.of(self.harness).close()
            await self.harness.close()
            self.harness = None

    async def restart(self) -> Deployment:
        await self.stop()
        return await self.start()

    async def tick(self, account: str = "demo"):
        """One poll of the account, then its due work until none is due (like --once)."""
        return await self.work.tick(account)

    async def store(self, account: str = "demo") -> WorkStore:
        return WorkStore(await self.harness.storage.domain(DOMAIN), account)

    async def entry(self, number: int = 1, account: str = "demo", repo: str = REPO):
        return await (await self.store(account)).pr(PrRef(account, repo, number))

    async def account_record(self, account: str = "demo"):
        """The account record (feed marks, tick times, rate limit, repository state)."""
        return await (await self.store(account)).load_account()

    def reviews(self, number: int = 1):
        return self.sb.state.reviews_of(REPO, number)

    def bot_comments(self, number: int = 1):
        """The bot's issue comments other than the PR's summary comment (replies, notices)."""
        return [c for c in self.sb.state.issue_comments_of(REPO, number)
                if c.user == BOT_LOGIN and SUMMARY_MARKER not in c.body]
