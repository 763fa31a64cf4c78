"""Scripted reviewers of known behaviour for the eval: they drive the real tools like
the scripted reviewer model, but report from a case's ground truth, so the score each must get
can be computed by hand.

* ``perfect``: every defect the push introduced, on its first line, and nothing else; on a
  second push it names the open threads on the defects the push fixed (``fixedThreads``);
* ``silent``: no finding;
* ``every_line``: one finding per added line of the PR's diff;
* ``repeater``: like ``perfect``, and on a second push every defect still present again;
* ``claims_all``: like ``perfect``, but names every open thread as fixed;
* ``decoys``: like ``perfect``, plus one finding on every decoy;
* ``fail``: every request of the case fails (HTTP 500), so its review is never posted;
* ``half``: like ``perfect`` for every other defect of the case (the 1st, 3rd, ...);
* ``off_by_4``: every defect, described rightly but 4 lines below its range (above it at the
  end of the file): by location alone it can land on a neighbouring defect; a judge says no;
* ``decoy_only``: one finding on every decoy, nothing else;
* ``vague`` (scored directly, not through the loop: the scripted model posts single lines):
  two "Something in here is wrong." comments spanning each changed hunk.

As a review team (``EvalConfig.team``) the same behaviours hold for the team as a whole: each
persona reports the behaviour's findings in the report format its system prompt asks for, and the
coordinator comments on each distinct finding once and names the fixed threads as the single
reviewer does, so a team and a single reviewer of one behaviour get the same score.

``scripted_findings`` gives what each behaviour reports as eval findings, so the scoring tests
can score the whole corpus without the loop.

The case is known from the repository name (``eval/<case id>``), the push from how many review
turns the PR's conversation has had.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from dsh_harness.testing import ModelRequest, Reply, ScriptedModelServer, is_compaction_request

from ..testing.reviewer_model import (
    _TARGET,
    Finding,
    compaction_reply,
    reviewer_policy,
    severity_of,
)
from ..testing.team_model import COORDINATOR_SYSTEM, PERSONA_SYSTEM, coordinator_reply
from .cases import Case
from .score import TOLERANCE, CaseRun, candidate_pairs, pair_key
from .score import Finding as EvalFinding
from .validate import hunks

BEHAVIOURS = ("perfect", "silent", "every_line", "repeater", "claims_all", "decoys", "fail",
              "half", "off_by_4", "decoy_only")
# A line of the <your_open_threads> block: "- thread <id>: <path>[:<line>]: <first line>".
_THREAD = re.compile(r"^- thread (\d+): ([^\s:]+)(?::(\d+))?: ", re.M)


def _push(req: ModelRequest) -> int:
    return sum(1 for m in req.messages if m.get("role") == "user"
               and str(m.get("content", "")).startswith("Flow: review"))


def _report(case: Case, push: int, behaviour: str) -> list[Finding]:
    def f(path: str, line: int, what: str) -> Finding:
        # The push in the message keeps a repeat from looking like the earlier comment.
        return Finding(path, line, f"line {line}", f"{what} (push {push})")

    if behaviour == "silent":
        return []
    if behaviour == "every_line":
        head, base = case.tree(push), case.tree(0)
        return [f(path, line, "Suspicious line.") for path in sorted(head)
                if head[path] != base.get(path)
                for _, _, added in hunks(base.get(path, ""), head[path])
                for line in sorted(added)]
    live = case.live(push)
    new = [d for d in live.values() if case.introduced_in(d.id) == push]
    if behaviour == "decoy_only":
        return [f(x.path, x.lines[0], "This looks unsafe.") for x in case.push[push - 1].decoys]
    if behaviour == "half":
        order = [d.id for d in case.defects]
        new = [d for d in new if order.index(d.id) % 2 == 0]
    if behaviour == "off_by_4":
        head = case.tree(push)
        out = []
        for d in new:
            below = d.lines[1] + 4
            line = below if below <= len(head[d.path].splitlines()) else max(1, d.lines[0] - 4)
            out.append(f(d.path, line, d.description))
        return out
    out = [f(d.path, d.lines[0], d.description) for d in new]
    if behaviour == "repeater":
        out += [f(d.path, d.lines[0], d.description) for d in live.values() if d not in new]
    if behaviour == "decoys":
        out += [f(x.path, x.lines[0], "This looks unsafe.") for x in case.push[push - 1].decoys]
    return out


def scripted_findings(case: Case, behaviour: str) -> list[EvalFinding]:
    """What ``behaviour`` reports on every push of ``case``, as the scorer reads findings."""
    out: list[EvalFinding] = []
    for push in range(1, len(case.push) + 1):
        if behaviour == "vague":
            head, base = case.tree(push), case.tree(0)
            for path in sorted(head):
                if head[path] == base.get(path):
                    continue
                for first, last, _ in hunks(base.get(path, ""), head[path]):
                    out += [EvalFinding(push=push, path=path, start_line=first, line=last,
                                        body="Something in here is wrong.")] * 2
            continue
        out += [EvalFinding(push=push, path=f.path, line=f.line, body=f.message)
                for f in _report(case, push, behaviour)]
    return out


def scripted_verdicts(case: Case, findings: list[EvalFinding]) -> dict[str, bool]:
    """A judge that reads like one: YES when the comment states the defect's description."""
    return {pair_key(case.id, f, d.id): d.description in f.body
            for f, d in candidate_pairs(case, CaseRun(case_id=case.id, findings=findings))}


def _fixed(cases: dict[str, Case], behaviour: Callable[[str], str], user: str,
           req: ModelRequest) -> list[int]:
    """The open threads on the defects this push fixed (``claims_all``: every open thread)."""
    m = _TARGET.search(user)
    case = cases.get(m.group(2).lower()) if m else None
    if case is None or "<your_open_threads>" not in user:
        return []
    block = user.split("<your_open_threads>", 1)[1].split("</your_open_threads>", 1)[0]
    threads = [(int(i), path, int(line) if line else None)
               for i, path, line in _THREAD.findall(block)]
    kind = behaviour(case.id)
    if kind == "claims_all":
        return [i for i, _, _ in threads]
    if kind not in ("perfect", "repeater", "decoys"):
        return []
    push = _push(req)
    gone = [d for d in case.live(push - 1).values() if d.id in case.push[push - 1].fixes]
    return [i for i, path, line in threads
            if any(path == d.path and line is not None
                   and d.lines[0] - TOLERANCE <= line <= d.lines[1] + TOLERANCE for d in gone)]


def _find(cases: dict[str, Case], behaviour: Callable[[str], str], diff: str,
          req: ModelRequest) -> list[Finding]:
    m = _TARGET.search(req.last_user_text())
    case = cases.get(m.group(2).lower()) if m else None
    if case is None:
        return []
    return _report(case, _push(req), behaviour(case.id))


def _persona(cases: dict[str, Case], behaviour: Callable[[str], str],
             req: ModelRequest) -> Reply:
    """A persona's report: the behaviour's findings of this push, in the persona format."""
    m = _TARGET.search(req.last_user_text())
    case = cases.get(m.group(2).lower()) if m else None
    if case is None or not req.last_user_text().startswith("Flow: review"):
        return Reply(content="No findings.")
    found = _report(case, _push(req), behaviour(case.id))
    lines = [f"- `{f.path}:{f.line}` RIGHT [{severity_of(f.message)}]: {f.message}" for f in found]
    return Reply(content="\n".join(lines) if lines else "No findings.")


def eval_model(cases: list[Case], behaviour: str | Callable[[str], str]) -> ScriptedModelServer:
    """A scripted model server reviewing ``cases`` with one behaviour (or one per case id)."""
    pick = (lambda _id: behaviour) if isinstance(behaviour, str) else behaviour
    by_repo = {c.id.lower(): c for c in cases}
    find = functools.partial(_find, by_repo, pick)
    fixed = functools.partial(_fixed, by_repo, pick)

    def policy(req: ModelRequest) -> Reply:
        if is_compaction_request(req):  # a session's summary, not a review request
            return compaction_reply(req)
        m = _TARGET.search(req.last_user_text())
        if m and m.group(2).lower() in by_repo and pick(by_repo[m.group(2).lower()].id) == "fail":
            raise LookupError("scripted failure")  # the server answers HTTP 500
        if PERSONA_SYSTEM.match(req.system):
            return _persona(by_repo, pick, req)
        if req.system.startswith(COORDINATOR_SYSTEM):
            return coordinator_reply(req, fixed=fixed)
        return reviewer_policy(req, find=find, fixed=fixed)

    return ScriptedModelServer(policy=policy)
