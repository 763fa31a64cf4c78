"""Which repositories an account reviews: its ``repositories`` list, or — for a GitHub App
account that lists none — every repository its installation can access.

The installation's list is read at each tick with conditional requests (``GET
/installation/repositories``; a free 304 while nothing changed), so adding the App to a
repository, or removing it, takes effect at the next tick without a restart. A PAT account
without ``repositories`` stays idle: a personal token sees far more than anyone means to review.
"""

from __future__ import annotations

import logging
from typing import Any

from ..github.errors import GitHubError, RateLimited

log = logging.getLogger(__name__)


class WatchedRepositories:
    def __init__(self, account: str, config: Any, client: Any):
        self.account, self.config, self.client = account, config, client
        self._last: list[str] | None = None

    @property
    def from_installation(self) -> bool:
        return self.config.app_mode and not self.config.repositories

    async def current(self) -> list[str]:
        if not self.from_installation:
            return list(self.config.repositories)
        try:
            names = await self.client.list_repositories()
        except RateLimited:
            raise
        except GitHubError as exc:
            if self._last is None:
                raise
            log.warning("account %s: cannot list the installation's repositories (%s); "
                        "keeping the last list", self.account, exc)
            return list(self._last)
        if names != self._last:
            log.info("account %s: the installation gives access to %d repositories: %s",
                     self.account, len(names), ", ".join(names) or "none")
        self._last = names
        return list(names)
