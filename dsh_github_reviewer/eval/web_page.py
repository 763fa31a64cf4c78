"""The web UI's eval page (``/eval``): the latest report ``dsh github-reviewer eval`` wrote into
this deployment's home (``<home>/eval/latest.json``), and the progress of a run under way
(``running.json``, rewritten after every batch)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from .report import html_fragment


def latest_path(home: Path) -> Path:
    return home / "eval" / "latest.json"


def running_path(home: Path) -> Path:
    return home / "eval" / "running.json"


def _load(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: {exc}"


def register(router: Any) -> None:
    async def eval_page(request):
        report, error = await asyncio.to_thread(_load, latest_path(router.harness.home))
        fragment = None
        if report is not None:
            try:
                fragment = html_fragment(report)
            except (KeyError, TypeError) as exc:  # a report from another version
                error = f"latest.json cannot be shown: missing {exc}"
        running, _ = await asyncio.to_thread(_load, running_path(router.harness.home))
        return await router.render(request, "reviewer_eval.html", fragment=fragment,
                                   error=error, running=running)

    async def eval_api(request):
        report, error = await asyncio.to_thread(_load, latest_path(router.harness.home))
        running, _ = await asyncio.to_thread(_load, running_path(router.harness.home))
        return router.json({"report": report, "error": error, "running": running})

    router.add_page("/eval", eval_page, "Eval")
    router.add_route("/api/eval", eval_api)
