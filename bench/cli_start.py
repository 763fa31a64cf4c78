"""Wall time of short `dsh` commands (the process start an operator waits for), before and after
the CLI stopped importing the openai and mcp SDKs eagerly.

"before" runs the tree of main just before that change (BEFORE_REV, extracted with `git archive`
into a temporary directory and put first on PYTHONPATH); "after" runs this checkout. Each
command runs RUNS times; the table shows the median. Needs git.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REV = "b99c1b0"  # main before issue 16's first landing
RUNS = 7
# (before the change `--version` did not exist: that row times the usage error it printed)
COMMANDS = [["--version"], ["github-reviewer", "--help"], ["plugins"]]


def median_s(pythonpath: str | None, args: list[str], cwd: str) -> float:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dsh_harness.cli", *args], cwd=cwd, env=env,
                       capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE_REV],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        empty = Path(tmp) / "empty"
        empty.mkdir()
        # The old CLI knew the demo only with a dsh.toml enabling the plugin.
        (empty / "dsh.toml").write_text('home = "state"\n[plugins.github-reviewer]\n')
        print(f"{'command':<28} {'before (' + BEFORE_REV + ')':>16} {'after':>8}")
        for args in COMMANDS:
            before = median_s(str(old), args, str(empty))
            after = median_s(None, args, str(empty))
            print(f"{'dsh ' + ' '.join(args):<28} {before:>14.2f} s {after:>6.2f} s")
        print(f"(median of {RUNS} runs each; machine shared, so compare columns, not runs)")


if __name__ == "__main__":
    main()
