"""Replicas paused (SIGSTOP/SIGCONT) around their GitHub writes and session appends.

A pause is placed deterministically: the replica is started with ``DSH_TEST_STOP_AT`` naming a
stop point (``dsh_harness.stop_point``: ``github:<METHOD> <path>`` just before a request,
``session-append:<event type>`` just before an append; ``#n`` = the n-th match) and stops
itself there. The test waits until it is stopped, lets another replica take the lease over
and finish the work, then resumes it (SIGCONT): a replica that lost its lease must write
nothing more. Checked afterwards: no review, reply, reaction or summary twice (``kill_loop``'s
invariants), and every session log well formed (``session_problems``: sequence numbers
consecutive, every line inside its own turn), which a stale writer's lines break.

Used by ``tests/e2e/test_replica_pauses.py`` (three pauses) and ``scripts/replica_loop.py
--pauses N`` (the long loop, with SIGKILLs too)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .deployment import Deployment
from .kill_loop import LoopReport, _check
from .sandbox import SandboxGitHub
from .scenario import BOT_LOGIN, FEATURE, REPO, build_shop

LEASE_TTL_S = 3.0
POLL_INTERVAL_S = 1.0
FENCED = b"this replica stops the work"

# Where a replica stops itself: the read that precedes the review POST (the second GET of the
# PR's reviews of a review run: the first is the check before the turn), each kind of write
# just before it is sent, and session appends inside a turn.
STOPS = {
    "read-before-post": "github:GET repos/acme/shop/pulls/{n}/reviews#2",
    "review-post": "github:POST repos/acme/shop/pulls/{n}/reviews",
    "summary": "github:PATCH repos/acme/shop/issues/comments/*",
    "reply-or-summary": "github:POST repos/acme/shop/issues/{n}/comments",
    "reaction": "github:POST repos/acme/shop/issues/comments/*/reactions",
    "append-assistant": "session-append:assistant_message",
    "append-tool-result": "session-append:tool_result",
    "append-turn-end": "session-append:turn_end",
}


@dataclass
class PauseReport(LoopReport):
    pauses: int = 0          # replicas that stopped at their point and were resumed later
    not_reached: int = 0     # started with a stop point another replica's work made moot
    fenced: int = 0          # resumed replicas that logged their lease lost
    # Liveness, apart from the safety invariants: pauses during which the other replica did
    # not finish the work (it did once the paused one resumed).
    late_takeovers: list[str] = field(default_factory=list)
    # For each late takeover: what the database showed then (``blocked``).
    late_details: list[list[str]] = field(default_factory=list)
    sessions: int = 0
    stops: dict[str, int] = field(default_factory=dict)


def spawn(config: Path, stop_at: str | None = None) -> subprocess.Popen:
    """A ``dsh run`` replica (log: ``replica-NNN.log`` beside the config)."""
    logs = sorted(config.parent.glob("replica-*.log"))
    path = config.parent / f"replica-{len(logs):03d}.log"
    env = {k: v for k, v in os.environ.items() if k != "DSH_TEST_STOP_AT"}
    if stop_at:
        env["DSH_TEST_STOP_AT"] = stop_at
    with open(path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config",
                                 str(config), "-v", "run"], cwd=config.parent, stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    proc.log_path = path  # type: ignore[attr-defined]
    return proc


def stopped(proc: subprocess.Popen) -> bool:
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def wait_for(what: str, cond: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def log_of(proc: subprocess.Popen) -> bytes:
    return proc.log_path.read_bytes()  # type: ignore[attr-defined]


def settled(sb: SandboxGitHub, report: LoopReport) -> bool:
    """Every PR's head reviewed and every /bot answered (what a finished replica leaves)."""
    st = sb.state
    for n in range(1, report.prs + 1):
        head = st.pull(REPO, n).head_sha
        if not any(r.commit_id == head and r.user == BOT_LOGIN for r in st.reviews_of(REPO, n)):
            return False
    bodies = [c.body for n in range(1, report.prs + 1) for c in st.issue_comments_of(REPO, n)
              if c.user == BOT_LOGIN]
    return all(any(f"reply-to:{cid} -->" in b for b in bodies) for cid in report.bots)


@dataclass
class Replicas:
    """The processes of a run: ``standby`` takes the leases over (the test stops and resumes
    it; it starts stopped at its first GitHub request, so it takes no work before it is
    asked), the paused ones, resumed, are SIGKILLed before the next pause."""

    config: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    standby: subprocess.Popen | None = None

    def start(self, stop_at: str | None = None) -> subprocess.Popen:
        proc = spawn(self.config, stop_at)
        self.procs.append(proc)
        return proc

    def quiet(self) -> None:
        """Nothing but a stopped standby: the next event waits for the replica that will
        stop itself at its point."""
        for proc in self.procs:
            if proc is not self.standby and proc.poll() is None:
                proc.kill()
                proc.wait()
        if self.standby is None or self.standby.poll() is not None:
            self.standby = self.start("github:*")
        else:
            self.standby.send_signal(signal.SIGSTOP)


def blocked(dsn: str) -> list[str]:
    """What waits in the database and on whom: a line per backend that waits for a lock, with
    each backend blocking it (its state, what it waits on itself, how long its transaction and
    its state have lasted, its last statement); then every lease row (a holder that renews, or
    one left to expire). Printed for a late takeover."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT w.pid, w.wait_event_type, w.wait_event, left(w.query, 120), "
            "b.pid, b.state, b.wait_event_type, b.wait_event, "
            "round(extract(epoch FROM now() - b.xact_start)::numeric, 1), "
            "round(extract(epoch FROM now() - b.state_change)::numeric, 1), left(b.query, 120) "
            "FROM pg_stat_activity w CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS bp "
            "JOIN pg_stat_activity b ON b.pid = bp WHERE w.datname = current_database() "
            "ORDER BY w.pid").fetchall()
        leases = conn.execute(
            "SELECT name, owner, token, round(extract(epoch FROM expires_at - now())::numeric, 1)"
            " FROM dsh_leases ORDER BY name").fetchall()
    return [*(f"backend {w} waiting ({wt}/{we}) in {wq!r} is blocked by backend {b}: {bs} "
              f"({bt}/{be}), transaction {bx} s old, in this state for {bc} s, last {bq!r}"
              for w, wt, we, wq, b, bs, bt, be, bx, bc, bq in rows),
            *(f"lease {name} held by {owner} (token {token}), expires in {left} s"
              for name, owner, token, left in leases)]


def pause_once(reps: Replicas, sb: SandboxGitHub, report: PauseReport, kind: str,
               number: int, rng: random.Random, *, kill: bool = False,
               reach_s: float = 60.0, dsn: str | None = None) -> bool:
    """Start a replica (the standby is stopped, so it takes the work) that stops itself at
    ``kind`` (for PR ``number``); once it has, resume the standby, which takes the lease over
    and finishes the work (``kill``: SIGKILLed on the way, a new standby started); then resume
    the paused one, which must log its lease lost. False when it never reached the point."""
    proc = reps.start(STOPS[kind].format(n=number))
    if not wait_for("the stop point", lambda: stopped(proc), reach_s):
        report.not_reached += 1
        proc.kill()
        proc.wait()
        return False
    report.pauses += 1
    report.stops[kind] = report.stops.get(kind, 0) + 1
    standby = reps.standby
    assert standby is not None
    wait_for("the standby stopped", lambda: stopped(standby), reach_s)
    standby.send_signal(signal.SIGCONT)
    if kill:  # most likely inside its takeover: the lease expires after LEASE_TTL_S
        wait_for("a moment", lambda: False, rng.uniform(LEASE_TTL_S, LEASE_TTL_S + 4))
        standby.kill()
        standby.wait()
        report.kills += 1
        reps.standby = reps.start()
    # Past the paused one's leases (another replica may take them: when work is left) and
    # until the work is done.
    paused_at = time.monotonic()
    if not wait_for("the work taken over", lambda: settled(sb, report) and (
            time.monotonic() - paused_at > 2 * LEASE_TTL_S), 90):
        report.late_takeovers.append(kind)
        report.late_details.append(blocked(dsn) if dsn else [])
    proc.send_signal(signal.SIGCONT)
    if wait_for("the fence", lambda: FENCED in log_of(proc), LEASE_TTL_S * 4):
        report.fenced += 1
    return True


def session_problems(events: list[dict], sid: str) -> list[str]:
    """Lines a stale writer leaves (``events``: a log's lines after its header, as JSON
    objects): a sequence number out of order, a line outside its turn (after that turn's end,
    or inside another turn)."""
    problems, seq, open_turn = [], 0, None
    for e in events:
        if e["seq"] != seq + 1:
            problems.append(f"{sid}: seq {e['seq']} after {seq}")
        seq = e["seq"]
        turn = e.get("turn")
        if e["type"] == "turn_start":
            if open_turn is not None:
                problems.append(f"{sid}: turn {turn} starts inside turn {open_turn}")
            open_turn = turn
        elif e["type"] == "turn_end":
            if open_turn != turn:
                problems.append(f"{sid}: end of turn {turn} while turn {open_turn} is open")
            open_turn = None
        elif turn is not None and turn != open_turn:
            problems.append(f"{sid}: a {e['type']} line of turn {turn} while turn {open_turn} "
                            "is open")
    return problems


def check_sessions(dsn: str, report: PauseReport) -> None:
    """Every session log in the database (the ``postgres`` store's rows) is well formed."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT session_id, line FROM dsh_session_lines WHERE seq > 0 "
                            "ORDER BY session_id, seq").fetchall()
    logs: dict[str, list[dict]] = {}
    for sid, line in rows:
        logs.setdefault(sid, []).append(json.loads(bytes(line)))
    for sid, events in sorted(logs.items()):
        report.sessions += 1
        report.problems += session_problems(events, sid)


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def event(sb: SandboxGitHub, report: LoopReport, rng: random.Random, step: int,
          kind: str) -> int:
    """A push (reviews, their reads and posts) or a /bot (reactions, replies) on a random PR,
    whichever reaches the stop point ``kind``; returns the PR's number."""
    number = rng.randint(1, report.prs)
    bot = kind in ("reaction", "reply-or-summary") or (
        kind.startswith("append") and rng.random() < 0.5)
    if not bot:
        sb.state.commit(REPO, f"feature-{number}",
                        {"shop/cart.py": FEATURE["shop/cart.py"] + f"# pause {step}\n"},
                        message=f"pause {step}")
        report.pushes += 1
    else:
        report.bots.append(sb.state.add_issue_comment(REPO, number, "maintainer",
                                                      f"/bot question {step}?").id)
    return number


def run_pause_loop(tmp: Path, sb: SandboxGitHub, model, dsn: str, *,
                   kinds: list[str], prs: int = 1, pauses: int | None = None,
                   kills: int = 0, seed: int = 5) -> PauseReport:
    """Pause replicas at ``kinds`` in turn (``pauses`` of them, default one per kind), each
    after a new event (the first: the PRs' first reviews); ``kills`` of the takeovers are
    SIGKILLed once on the way. Then check every invariant."""
    rng = random.Random(seed)
    build_shop(sb, prs=prs)
    toml_kw = {"poll_interval_s": POLL_INTERVAL_S, "dsn": dsn, "lease_ttl_s": LEASE_TTL_S}
    config = Deployment(tmp, sb, model, **toml_kw).write_config()
    report = PauseReport(prs=prs)
    reps = Replicas(config)
    total = pauses if pauses is not None else len(kinds)
    kill_at = set(rng.sample(range(total), min(kills, total)))
    try:
        step = 0
        while report.pauses < total and step < total * 2:
            kind = kinds[step % len(kinds)]
            reps.quiet()
            if step == 0 and kind not in ("reaction", "reply-or-summary", "summary"):
                number = 1  # the first review of PR 1
            else:
                number = event(sb, report, rng, step, kind)
            pause_once(reps, sb, report, kind, number, rng, kill=step in kill_at, dsn=dsn)
            step += 1
        if reps.standby is not None:
            reps.standby.send_signal(signal.SIGCONT)
        if not wait_for("the last work", lambda: settled(sb, report), 90):
            report.problems.append("the last work was never finished")
    finally:
        stop_all(reps.procs)
    asyncio.run(_check(tmp, sb, model, report, **toml_kw))
    check_sessions(dsn, report)
    return report
