"""Replicas under a SIGKILL loop: several ``dsh run`` processes on one PostgreSQL database
(storage and sessions), one of them killed at random moments and started again while pushes,
``/bot`` and ``/review`` arrive; then the same durability invariants as the single-process loop
(``kill_loop``): every trigger answered exactly once, every head reviewed once, nothing left
queued. Used by ``tests/e2e/test_replicas.py`` (a short loop) and ``scripts/replica_loop.py``
(the long one)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dsh_harness.testing import free_port

from .deployment import Deployment
from .kill_loop import PRS, LoopReport, _check, _event
from .round_robin import RoundRobinProxy
from .sandbox import SandboxGitHub
from .scenario import REPO, build_shop

POLL_INTERVAL_S = 1.0
# Short leases so a killed replica's PR work is taken over within the loop.
LEASE_TTL_S = 3.0
# With webhooks, polling only reconciles what a lost delivery missed.
RECONCILE_S = 10.0


def _dsh(config: Path, *args: str, port: int = 0) -> subprocess.Popen:
    # Each replica's log is kept beside the config (replica-<n>.log) for a failed run's reader.
    logs = sorted(config.parent.glob("replica-*.log"))
    path = config.parent / f"replica-{len(logs):03d}.log"
    # Replicas on one host share the config; each listens for webhooks on its own port.
    env = {**os.environ, "DSH_WEBHOOK_PORT": str(port)}
    with open(path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", "--config",
                                 str(config), "-v", "run", *args], cwd=config.parent,
                                stdout=log, stderr=subprocess.STDOUT, env=env)
    proc.log_path = path  # type: ignore[attr-defined]
    return proc


def _once(config: Path, report: LoopReport) -> None:
    done = subprocess.run([sys.executable, "-m", "dsh_harness.cli", "--config", str(config),
                           "run", "--once"], cwd=config.parent, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        report.problems.append(f"dsh run --once failed: {done.stderr[-500:]}")


def _wait_running(config: Path, count: int, timeout_s: float = 120.0,
                  procs: list[subprocess.Popen] | None = None) -> None:
    """Until ``count`` replicas (of ``procs``: these processes, now) are running."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if procs is None:
            up = len(running_logs(config.parent))
        else:
            up = sum(1 for p in procs if p.poll() is None
                     and b"dsh running" in p.log_path.read_bytes())  # type: ignore[attr-defined]
        if up >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"fewer than {count} replicas started within {timeout_s:.0f} s")


def _wait_listening(ports: list[int], timeout_s: float = 120.0) -> None:
    """Until every one of ``ports`` on 127.0.0.1 accepts a connection."""
    deadline = time.monotonic() + timeout_s
    waiting = list(ports)
    while waiting:
        port = waiting[0]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                waiting.pop(0)
                continue
        except OSError:
            pass
        if time.monotonic() >= deadline:
            raise RuntimeError(f"webhook receivers on ports {waiting} did not listen within "
                               f"{timeout_s:.0f} s")
        time.sleep(0.1)


def running_logs(directory: Path) -> list[Path]:
    """The replica logs of processes that got as far as running (as replicas)."""
    return [p for p in sorted(directory.glob("replica-*.log"))
            if b"running as replica" in p.read_bytes()]


def workers(directory: Path) -> int:
    """How many replica processes posted a review or answered a /bot."""
    return sum(1 for p in sorted(directory.glob("replica-*.log"))
               if b"review posted" in p.read_bytes() or b" answered" in p.read_bytes())


def terminate_connections(dsn: str) -> int:
    """``pg_terminate_backend`` on every other connection to the database (an operator's or a
    failover's doing): the replicas' pooled connections die mid-statement."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                           ).fetchone()
    return int(row[0]) if row else 0


def run_replica_loop(tmp: Path, sb: SandboxGitHub, model, dsn: str, *, replicas: int = 3,
                     kills: int = 10, seed: int = 7, max_pause_s: float = 2.0,
                     cluster: Any = None, outage_s: float = 0.0,
                     terminate_every: int = 0, webhook_secret: str | None = None,
                     prs: int = PRS) -> LoopReport:
    """Run ``replicas`` replicas, SIGKILL one of them ``kills`` times (each restarted at
    once), let the survivors finish, then check the invariants; returns what it checked.

    Database faults: every ``terminate_every``-th step also terminates every connection to the
    database; with ``cluster`` (a ``dsh_harness.testing.postgres.PostgresCluster``) and
    ``outage_s``, the server is stopped for that long half-way through, while events keep
    arriving; the replicas must carry on afterwards without a restart.

    ``webhook_secret``: every replica also runs the webhook receiver (on a port of its own)
    behind one round-robin proxy that the sandbox GitHub delivers to; polling then only
    reconciles (``RECONCILE_S``). ``report.deliveries`` counts what each replica answered."""
    rng = random.Random(seed)
    build_shop(sb, prs=prs)
    toml_kw: dict[str, Any] = {"poll_interval_s": POLL_INTERVAL_S, "dsn": dsn,
                               "lease_ttl_s": LEASE_TTL_S}
    ports = [0] * replicas
    if webhook_secret:
        ports = [free_port() for _ in range(replicas)]
        toml_kw["webhook"] = (f'enabled = true\nhost = "127.0.0.1"\n'
                              f'port = "${{DSH_WEBHOOK_PORT:-0}}"\nsecret = "{webhook_secret}"\n'
                              f"reconcile_interval_s = {RECONCILE_S}")
    config = Deployment(tmp, sb, model, **toml_kw).write_config()
    report = LoopReport(prs=prs)
    _once(config, report)  # the bot runs before the first event (older comments are history)
    procs: list[subprocess.Popen] = []
    with contextlib.ExitStack() as stack:
        stack.callback(_stop_all, procs)  # the list as it is then: restarted ones included
        procs += [_dsh(config, port=ports[i]) for i in range(replicas)]
        if webhook_secret:
            proxy = stack.enter_context(RoundRobinProxy(ports))
            report.deliveries = proxy.answered
        _wait_running(config, replicas)  # side by side: no home lock turned one away
        if webhook_secret:
            # Deliveries go out only once every receiver listens: on a loaded machine a
            # replica logs that it runs well before its receiver binds, and deliveries to
            # none of them would leave the spread to chance.
            _wait_listening(ports)
            sb.add_hook(f"{proxy.url}/github/webhook", webhook_secret, repo=REPO)
        _loop(rng, sb, report, config, procs, ports, dsn, kills=kills, max_pause_s=max_pause_s,
              cluster=cluster, outage_s=outage_s, terminate_every=terminate_every)
    time.sleep(LEASE_TTL_S)
    _once(config, report)
    asyncio.run(_check(tmp, sb, model, report, **toml_kw))
    return report


def _loop(rng: random.Random, sb: SandboxGitHub, report: LoopReport, config: Path,
          procs: list[subprocess.Popen], ports: list[int], dsn: str, *, kills: int,
          max_pause_s: float, cluster: Any, outage_s: float, terminate_every: int) -> None:
    replicas = len(procs)
    for step in range(kills):
        _event(rng, sb, report, step)
        time.sleep(rng.uniform(0.2, max_pause_s))
        if rng.random() < 0.5:
            _event(rng, sb, report, step + 1000)
            time.sleep(rng.uniform(0.0, 0.5))
        if terminate_every and step % terminate_every == terminate_every - 1:
            report.terminated += terminate_connections(dsn)
        if cluster is not None and outage_s and step == kills // 2:
            # Every replica is up when the server goes (one still starting would exit
            # on its refused first connection, and a supervisor would restart it).
            _wait_running(config, replicas, procs=procs)
            cluster.pause()
            _event(rng, sb, report, step + 2000)  # arrives while the database is down
            time.sleep(outage_s)
            cluster.resume()
            time.sleep(POLL_INTERVAL_S * 3)
            exited = [i for i, proc in enumerate(procs) if proc.poll() is not None]
            report.problems += [f"replica {i} exited during the database outage"
                                for i in exited]
        victim = rng.randrange(replicas)
        os.kill(procs[victim].pid, signal.SIGKILL)
        procs[victim].wait()
        report.kills += 1
        procs[victim] = _dsh(config, port=ports[victim])
    # The survivors finish the work: wait for leases of the last kill to expire and the
    # replicas to take it over, then stop them and check with one last pass.
    time.sleep(LEASE_TTL_S * 3 + POLL_INTERVAL_S * 3)


def _stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
