"""What a PR procedure needs, passed in (composition): the connected account, its store, the
account's reviewer (the single reviewer or the team, behind one interface), and a clock."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from dsh_harness import Fence

from ..core.clock import utcnow
from .pause import AccountPause
from .store import WorkStore

if TYPE_CHECKING:
    from ..config import AccountConfig
    from ..github.account import ConnectedAccount
    from ..github.client import GitHubClient
    from ..reviewers.base import Reviewer


@dataclass
class ReviewDeps:
    """What the record-free review procedure (``work/procedure.py``) needs: the connected
    account, its reviewer and a clock. Every front end has these (the daemon, CI, the eval's
    daemon); only the daemon also has a store and a pause (``WorkContext``)."""

    acct: ConnectedAccount
    runner: Reviewer
    clock: Callable[[], datetime] = utcnow
    # The daemon's records (what its summary lists from them, e.g. the second look's
    # outcomes); None in CI, which keeps none.
    store: WorkStore | None = None

    @property
    def cfg(self) -> AccountConfig:
        return self.acct.config

    @property
    def client(self) -> GitHubClient:
        return self.acct.client


@dataclass
class WorkContext:
    acct: ConnectedAccount
    store: WorkStore
    runner: Reviewer
    # The account's pause, shared with its poll loop (app.service passes the one object).
    pause: AccountPause
    clock: Callable[[], datetime] = utcnow

    @property
    def cfg(self) -> AccountConfig:
        return self.acct.config

    @property
    def client(self) -> GitHubClient:
        return self.acct.client

    @property
    def fence(self) -> Fence:
        """The PR lease's fence this context's writes prove (``fenced``)."""
        return self.acct.client.fence

    def fenced(self, fence: Fence) -> WorkContext:
        """This context for one PR's run under its lease: the account seen through a client
        whose every GitHub write proves ``fence`` first; the reviewers hand the same fence to
        the PR's sessions (``acct.client.fence``), so their appends prove it too."""
        acct = dataclasses.replace(self.acct, client=self.acct.client.fenced(fence))
        return dataclasses.replace(self, acct=acct)

    def deps(self) -> ReviewDeps:
        return ReviewDeps(self.acct, self.runner, self.clock, self.store)


def short_error(exc: BaseException) -> str:
    from ..core.sanitizer import redact_secrets

    text = str(exc) or type(exc).__name__
    if not isinstance(exc, _KNOWN):
        text = f"{type(exc).__name__}: {text}"
    return redact_secrets(text)[:500]


def _known() -> tuple[type[BaseException], ...]:
    from ..github.errors import GitHubError

    return (GitHubError,)


_KNOWN = _known()
