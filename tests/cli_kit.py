"""Running the real ``dsh`` command line in a subprocess, from a chosen directory, with an
environment stripped of the operator's credentials (so every test sees a fresh shell)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

PAT = "ghp_" + "0pS" * 12
STRIPPED = ("GITHUB_TOKEN", "GITHUB_REPOSITORIES", "DEEPSEEK_API_KEY", "DSH_DISABLE_PLUGINS",
            "DSH_WEB_TOKEN")


def dsh(*args: str, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in STRIPPED}
    base["HOME"] = str(cwd)
    return subprocess.run([sys.executable, "-m", "dsh_harness.cli", *args], cwd=cwd,
                          env=base | (env or {}), capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The failure a user sees: exit 1, no traceback, stderr starting with ``dsh:``."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("dsh: "), proc.stderr
    return proc.stderr


PAT_FROM_ENV = 'personal_access_token = "${GITHUB_TOKEN}"'


def reviewer_toml(*, account: str = PAT_FROM_ENV, top: str = "", extra_blocks: str = "") -> str:
    """A deployment with one github-reviewer account (PAT from the test's environment)."""
    return (f"{top}\n[plugins.github-reviewer]\n\n[[plugins.github-reviewer.accounts]]\n"
            f'name = "main"\n{account}\n{extra_blocks}')


def write_pem(path: Path) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path
