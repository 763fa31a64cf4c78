"""One ``dsh run`` per home: a second one refuses at once, naming the holder's PID."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_harness.home_lock import HomeLock, HomeLocked

HOLDER = """
import sys, time
from pathlib import Path
from dsh_harness.home_lock import HomeLock
lock = HomeLock(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_second_lock_is_refused_and_names_the_pid(tmp_path):
    with HomeLock(tmp_path):
        with pytest.raises(HomeLocked, match=f"pid {os.getpid()}"):
            # flock locks belong to the open file description: a second open conflicts even
            # in the same process, as it would in a second process.
            HomeLock(tmp_path).acquire()
    HomeLock(tmp_path).acquire()   # released: free again


def test_lock_dies_with_its_process_even_on_sigkill(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(HomeLocked, match=f"pid {proc.pid}"):
            HomeLock(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while True:   # the kernel releases the lock as the process goes
        try:
            HomeLock(tmp_path).acquire()
            break
        except HomeLocked:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_dsh_run_refuses_a_locked_home_and_read_only_commands_do_not(tmp_path):
    home = tmp_path / "home"
    config = tmp_path / "dsh.toml"
    # Something to run (the web UI, on any free port): the lock is taken before it starts.
    config.write_text(f'home = "{home}"\n[web]\nenabled = true\nport = 0\n')
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    with HomeLock(home):
        run = subprocess.run([sys.executable, "-m", "dsh_harness.cli", "--config", str(config),
                              "run", "--once"], capture_output=True, text=True, env=env,
                             timeout=60)
        assert run.returncode == 1
        assert f"another dsh run (pid {os.getpid()})" in run.stderr
        ls = subprocess.run([sys.executable, "-m", "dsh_harness.cli", "--config", str(config),
                             "sessions", "list"], capture_output=True, text=True, env=env,
                            timeout=60)
        assert ls.returncode == 0, ls.stderr
