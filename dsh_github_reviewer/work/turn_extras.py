"""What a PR's record and the account's storage add to its next review turn
(``turn.extras.TurnExtras``): the repository's lessons, ``/review full``, the second look
(``verify`` of the base's ``.github/dsh-review.toml`` when it says, else ``review.verify``)."""

from __future__ import annotations

from ..config import ReviewSettings
from ..core.session_key import PrRef
from ..turn.extras import TurnExtras
from ..turn.repo_config import RepoSettings
from .context import WorkContext
from .lessons import LessonStore, notes
from .records import PrRecord
from .second_look import saver


async def turn_extras(ctx: WorkContext, ref: PrRef, rec: PrRecord,
                      settings: RepoSettings | None) -> TurnExtras:
    lessons = await LessonStore(ctx.store.domain, ctx.acct.key).active(ref.repo)
    verify = verify_enabled(ctx.cfg.review, settings)
    return TurnExtras(lessons=notes(lessons), full=rec.full_review, verify=verify,
                      save_second_look=saver(ctx.store.domain, ref) if verify else None)


def verify_enabled(review: ReviewSettings, settings: RepoSettings | None) -> bool:
    """``verify`` of the repository config when it says, else ``review.verify`` (the daemon
    and CI decide it here alike)."""
    said = settings.config.verify if settings is not None else None
    return review.verify if said is None else said
