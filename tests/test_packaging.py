"""The built wheel carries the plugin manifest inside the reviewer package."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_contains_manifest_and_entry_point(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, cwd=tmp_path)
    (wheel,) = tmp_path.glob("dsh_github_reviewer-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert "dsh_github_reviewer/plugin.toml" in names
        for data in ("dsh_harness/web/templates/index.html", "dsh_harness/web/static/app.js",
                     "dsh_harness/web/static/style.css",
                     "dsh_github_reviewer/web/templates/reviewer_status.html"):
            assert data in names, f"{data} missing from the wheel"
        assert not any(n.startswith(("tests/", "bench/", "docs/")) for n in names)
        manifest = zf.read("dsh_github_reviewer/plugin.toml").decode()
        assert manifest == (ROOT / "plugin.toml").read_text()
        # What `dsh init` writes from an installed wheel.
        example = zf.read("dsh_github_reviewer/dsh.example.toml").decode()
        assert example == (ROOT / "dsh.example.toml").read_text()
        (ep,) = [n for n in names if n.endswith("entry_points.txt")]
        entry_points = zf.read(ep).decode()
    assert "[dsh]" in entry_points
    assert "dsh-github-reviewer = dsh_github_reviewer.plugin" in entry_points
    assert "[console_scripts]" in entry_points and "dsh = dsh_harness.cli:main" in entry_points


def test_the_example_config_points_at_docs_that_exist_where_it_says():
    """What `dsh init` writes — from a checkout or an installed wheel, which has no docs/ —
    names only docs files the source repository has, says they are there (not next to the
    installed file), and names the command that validates the file everywhere."""
    text = (ROOT / "dsh.example.toml").read_text()
    named = set(re.findall(r"docs/[\w.-]+\.md", text))
    assert named and all((ROOT / p).is_file() for p in named), named
    header = text.split("\n\n", 1)[0]
    assert "docs/config.en.md" in header and "source repository" in header
    assert "not of the wheel" in header and "`dsh config check`" in header
