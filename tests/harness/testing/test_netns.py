"""An ordinary user runs the demo and the sandbox tests in a network namespace of their own.

Root (or CAP_NET_BIND_SERVICE) binds the sandbox GitHub's port 80 directly; anyone else, where
the kernel allows unprivileged user namespaces, gets a user namespace that maps them to root and
a network namespace with only a loopback interface (``dsh_harness.testing.netns``). The last
test switches to the ``nobody`` account and runs the real demo and a PostgreSQL test that way.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from dsh_harness.testing import netns

ROOT = Path(__file__).resolve().parents[3]
needs_namespaces = pytest.mark.skipif(not netns.available(),
                                      reason="unprivileged user namespaces are unavailable here")


def _in_namespace(code: str) -> subprocess.CompletedProcess[str]:
    argv = netns.isolated_argv([sys.executable, "-c", code])
    return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@needs_namespaces
def test_inside_the_namespace_loopback_is_up_and_port_80_binds():
    done = _in_namespace(
        "import os, socket\n"
        "from dsh_harness.testing import netns\n"
        "s = socket.socket(); s.bind(('127.0.0.9', 80)); s.listen()\n"
        "c = socket.create_connection(('127.0.0.9', 80), timeout=5)\n"
        "print(netns.inside(), netns.user_namespace_root(), os.geteuid())\n")
    assert done.returncode == 0, done.stderr
    # Root only inside: the uid outside is whoever ran it (root here maps to itself: False).
    inside, ns_root, euid = done.stdout.split()
    assert inside == "True" and euid == "0"
    assert ns_root == ("True" if os.geteuid() != 0 else "False")


def test_outside_no_namespace_is_claimed():
    assert not netns.inside() or os.environ.get(netns.ENV_FLAG) == "1"
    assert netns.main([]) == 2


def _nobody_can_read(*paths: Path) -> bool:
    return all(subprocess.run(["runuser", "-u", "nobody", "--", "test", "-r", str(p)],
                              capture_output=True).returncode == 0 for p in paths)


@pytest.mark.slow
@needs_namespaces
def test_an_ordinary_user_runs_the_demo_and_a_postgres_test(tmp_path):
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("switching to an ordinary user needs root and runuser")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' account")
    system_python = Path("/usr/bin/python3")
    purelib = Path(sysconfig.get_paths()["purelib"])
    probe = subprocess.run([str(system_python), "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True) if system_python.exists() else None
    if probe is None or probe.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip("no system Python of this version for the ordinary user's venv")
    if not _nobody_can_read(ROOT / "pyproject.toml", purelib):
        pytest.skip("the checkout or the test venv is not readable by other users")
    home = Path(tempfile.mkdtemp(prefix="dsh-nobody-"))
    try:
        home.chmod(0o777)
        venv = home / "venv"
        subprocess.run(["runuser", "-u", "nobody", "--", str(system_python), "-m", "venv",
                        "--without-pip", str(venv)], check=True, capture_output=True)
        site = next((venv / "lib").glob("python3.*/site-packages"))
        (site / "test-venv-deps.pth").write_text(f"{purelib}\n")
        (site / "test-venv-deps.pth").chmod(0o644)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home),
               "PYTHONPATH": str(ROOT), "DSH_TEST_POSTGRES": "required",
               "PYTEST_DEBUG_TEMPROOT": str(home)}
        as_nobody = ["runuser", "-u", "nobody", "--", "env", *(f"{k}={v}" for k, v in
                                                                env.items())]
        demo = subprocess.run([*as_nobody, str(venv / "bin/python"), "-m", "dsh_harness.cli",
                               "github-reviewer", "demo"], cwd=home, capture_output=True,
                              text=True, timeout=300)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert "running in a network namespace of its own" in demo.stderr
        assert "on a network namespace of its own" in demo.stdout
        assert "Reply to /bot:" in demo.stdout
        # The PostgreSQL server refuses uid 0, which the user is inside the namespace: it runs
        # as another uid of a nested one.
        tests = subprocess.run([*as_nobody, *netns.isolated_argv([
            str(venv / "bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "tests/harness/storage/test_storage_postgres.py", "-k", "serialized"],
            python=str(venv / "bin/python"))],
            cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert tests.returncode == 0, tests.stdout + tests.stderr
        assert " passed" in tests.stdout and "skipped" not in tests.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)
