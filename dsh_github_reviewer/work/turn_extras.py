"""What a PR's record and the account's storage add to its next review turn
(``turn.extras.TurnExtras``): the repository's lessons, ``/review full``, the second look
(``verify`` of the base's ``.github/dsh-review.toml`` when it says, else ``review.verify``)."""

from __future__ import annotations

from ..core.session_key import PrRef
from ..turn.extras import TurnExtras
from .context import WorkContext
from .lessons import LessonStore, notes
from .records import PrRecord
from .second_look import saver


async def turn_extras(ctx: WorkContext, ref: PrRef, rec: PrRecord, settings: object | None
                      ) -> TurnExtras:
    lessons = await LessonStore(ctx.store.domain, ctx.acct.key).active(ref.repo)
    verify = verify_enabled(ctx.cfg.review, settings)
    return TurnExtras(lessons=notes(lessons), full=rec.full_review, verify=verify,
                      save_second_look=saver(ctx.store.domain, ref) if verify else None)


def verify_enabled(review: object, settings: object | None) -> bool:
    """``verify`` of the repository config when it says, else ``review.verify``."""
    config = getattr(settings, "config", None)
    repo = getattr(config, "verify", None)
    if isinstance(repo, bool):
        return repo
    return bool(getattr(review, "verify", False))
