"""The summary's scan of a PR session log is incremental: scanning a log in pieces, as it
grows turn by turn, finds what one scan of the whole log finds (costs, and the findings each
review trigger's last attempt drafted), and a log that is not the same list grown is scanned
whole again."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from dsh_github_reviewer.core.triggers import Trigger
from dsh_github_reviewer.work.summary import COMMENT_TOOL, _Scan
from dsh_harness.sessions.events import (
    AssistantMessage,
    ToolCall,
    ToolResult,
    TurnStart,
    Usage,
)

T0 = datetime(2026, 1, 2, tzinfo=UTC)


def review_turn(turn: int, push: str, path: str, ok: bool = True) -> list:
    trigger = Trigger.auto("demo", push.removeprefix("push ")).format()   # as the meta stores it
    seq = turn * 10
    call = ToolCall(id=f"c{turn}", name=COMMENT_TOOL, arguments=json.dumps(
        {"path": path, "body": f"Finding {turn}", "subjectType": "LINE", "line": turn,
         "severity": "major"}))
    return [TurnStart(seq=seq, at=T0, turn=turn, meta={"flow": "review", "trigger": trigger}),
            AssistantMessage(seq=seq + 1, at=T0, turn=turn, tool_calls=[call],
                             usage=Usage(uncached_input=100, cache_read=50 * turn,
                                         cost_usd=0.001 * turn)),
            ToolResult(seq=seq + 2, at=T0, turn=turn, call_id=call.id, name=COMMENT_TOOL,
                       content="ok", is_error=not ok)]


def found(scan: _Scan) -> dict:
    return {"cost": scan.cost_usd, "prompt": scan.prompt_tokens,
            "cached": scan.cache_read_tokens,
            "drafted": {f"push {t.ident}": [(d.path, d.line, d.body) for d in ds]
                        for t, ds in scan.by_trigger.items()}}


def test_a_log_scanned_as_it_grows_finds_what_one_whole_scan_finds():
    turns = [review_turn(1, "push a", "a.py"), review_turn(2, "push b", "b.py", ok=False),
             review_turn(3, "push a", "c.py"), review_turn(4, "push d", "d.py")]
    log: list = []
    grown = _Scan()
    for turn in turns:
        log.extend(turn)
        assert grown.continues(log) == bool(grown.count)   # a fresh scan starts anywhere
        grown.feed(log)
    whole = _Scan()
    whole.feed(list(log))
    assert found(grown) == found(whole)
    # "push a" drafted again in turn 3: only that attempt counts; b's call was refused.
    assert found(whole)["drafted"] == {"push a": [("c.py", 3, "Finding 3")], "push b": [],
                                       "push d": [("d.py", 4, "Finding 4")]}


def test_a_log_read_anew_is_not_taken_for_the_one_scanned():
    log = review_turn(1, "push a", "a.py")
    scan = _Scan()
    scan.feed(log)
    reread = [e.model_copy() for e in log] + review_turn(2, "push b", "b.py")
    assert not scan.continues(reread)   # the same events, but not the same objects
    assert not _Scan().continues(log)
