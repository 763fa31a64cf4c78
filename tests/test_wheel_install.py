"""The built wheel, installed into a fresh virtualenv, runs the offline demo and
its other commands from an empty directory (no dsh.toml anywhere)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GITHUB_TOKEN", "DEEPSEEK_API_KEY", "VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(args, cwd=cwd, env=env | {"HOME": str(cwd)}, capture_output=True,
                          text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv holding the wheel built from this tree. Its dependencies come from the test
    venv's site-packages through a .pth file, so the install resolves them offline and checks
    them (no --no-deps); the github-mcp-server binary that its PyPI package would put next to
    the interpreter is linked there the same way."""
    tmp = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                  str(tmp / "dist"), str(ROOT)], cwd=tmp)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("dsh_github_reviewer-*.whl")
    venv = tmp / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp).returncode == 0
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=tmp).stdout.strip()
    (Path(purelib) / "test-venv-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (venv / "bin" / "github-mcp-server").symlink_to(Path(sys.executable).parent /
                                                    "github-mcp-server")
    proc = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
                 "-q", str(wheel)], cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    where = _run([str(python), "-c", "import dsh_harness, dsh_github_reviewer as r; "
                  "print(dsh_harness.__file__); print(r.__file__)"], cwd=tmp).stdout
    assert all(line.startswith(purelib) for line in where.split()), where
    return venv / "bin" / "dsh"


def test_wheel_runs_the_demo_from_an_empty_directory(installed, tmp_path):
    proc = _run([str(installed), "github-reviewer", "demo", "--json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["steps"] == ["first review", "re-review after a push",
                               "/bot question answered"]
    first = report["posted"]["reviews"][0]
    # The scripted reviewer found real issues by reading the PR through github-mcp-server.
    assert first["comments"], "the demo review has no inline comments: the MCP reads failed"
    assert list(tmp_path.iterdir()) == [], "the demo leaves nothing in the current directory"


def test_wheel_commands_from_an_empty_directory(installed, tmp_path):
    proc = _run([str(installed), "--version"], cwd=tmp_path)
    assert proc.returncode == 0 and "dsh-github-reviewer" in proc.stdout
    proc = _run([str(installed), "plugins"], cwd=tmp_path)
    assert proc.returncode == 0 and "dsh-github-reviewer" in proc.stdout
    proc = _run([str(installed), "github-reviewer", "status"], cwd=tmp_path)
    assert proc.returncode == 1 and "needs a config file" in proc.stderr
    proc = _run([str(installed), "run", "--once"], cwd=tmp_path)
    assert proc.returncode == 1 and "needs a config file" in proc.stderr
    assert list(tmp_path.iterdir()) == []
    # The command the message names works from the installed wheel alone.
    assert "run `dsh init`" in proc.stderr
    proc = _run([str(installed), "init"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dsh.toml").read_text() == (ROOT / "dsh.example.toml").read_text()
    proc = _run([str(installed), "config", "check"], cwd=tmp_path)
    assert proc.returncode == 1 and "GITHUB_TOKEN" in proc.stderr, proc.stderr
    assert "GITHUB_REPOSITORIES" in proc.stderr and "Traceback" not in proc.stderr


def test_scripts_run_on_a_fresh_copy_creates_dsh_toml_and_names_the_variables(tmp_path):
    """README's first command on a fresh copy of the tracked files: scripts/run installs the
    project into .venv, creates dsh.toml from the example, and without credentials stops
    naming what to set. (.venv is pre-made with the test venv's packages visible, as above,
    so the install needs no network.)"""
    listed = _run(["git", "ls-files", "-z"], cwd=ROOT)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            (clone / name).write_bytes(source.read_bytes())
    assert not (clone / "dsh.toml").exists(), "dsh.toml is the operator's file, not tracked"
    venv = clone / ".venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path
                ).returncode == 0
    purelib = _run([str(venv / "bin/python"), "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=tmp_path).stdout.strip()
    (Path(purelib) / "test-venv-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = _run(["bash", "scripts/run", "--once"], cwd=clone)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "created dsh.toml from dsh.example.toml" in proc.stderr
    assert "GITHUB_TOKEN" in proc.stderr and "DEEPSEEK_API_KEY" in proc.stderr
    assert "GITHUB_REPOSITORIES" in proc.stderr  # without it a token account idles
    assert "Traceback" not in proc.stderr
    assert (clone / "dsh.toml").read_text() == (clone / "dsh.example.toml").read_text()
    # Owner-only like `dsh init`'s: the operator's file may come to hold tokens.
    assert (clone / "dsh.toml").stat().st_mode & 0o777 == 0o600


def test_wheel_ships_the_eval_corpus(installed, tmp_path):
    """The eval cases are package data; the installed wheel finds and validates them."""
    python = installed.parent / "python"
    proc = _run([str(python), "-c", "from dsh_github_reviewer.eval import check_cases, "
                 "load_cases; cs = load_cases(); print(len(cs), len(check_cases(cs)))"],
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    count, problems = map(int, proc.stdout.split())
    assert count >= 40 and problems == 0
