"""A hanging test fails named, within the per-test timeout, instead of
hanging the run; the timeout is part of the project's pytest configuration."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HANGS = '''
import threading, time

def test_fine():
    pass

def test_waits_forever():
    threading.Event().wait()
'''


def test_the_suite_runs_under_a_per_test_timeout():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    options = project["tool"]["pytest"]["ini_options"]
    assert 0 < options["timeout"] <= 900 and 0 < options["faulthandler_timeout"]
    assert any(d.startswith("pytest-timeout") for d in
               project["project"]["optional-dependencies"]["test"])


@pytest.mark.slow
def test_a_hanging_test_fails_naming_itself(tmp_path):
    (tmp_path / "test_hangs.py").write_text(HANGS)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "timeout=3", "-c", str(ROOT / "pyproject.toml"),
                           "--rootdir", str(tmp_path), str(tmp_path / "test_hangs.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "FAILED" in out and "test_waits_forever" in out and "Timeout" in out, out
    assert "1 passed" in out, out
