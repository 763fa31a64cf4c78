"""Whether a CI run's sessions are worth a new ``actions/cache`` entry.

``action.yml`` records a fingerprint of the sessions directory right after the restore and asks
again after the review. Saving is skipped when there is nothing to save (a Dependabot or fork
run that never reviewed: actions/cache would end the job with a "Path Validation Error"
warning) and when nothing changed (a run that found its head already reviewed would store an
identical entry under a new key, filling the repository's cache quota with copies).

    python -m dsh_github_reviewer.ci.fingerprint record DIR FILE
    python -m dsh_github_reviewer.ci.fingerprint changed DIR FILE   # prints save=true|false

``changed`` appends its answer to ``$GITHUB_OUTPUT`` when that is set, and always prints it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path


def fingerprint(directory: Path) -> str:
    """A digest of every file's relative path and bytes; ``""`` for a missing or empty tree."""
    if not directory.is_dir():
        return ""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    if not files:
        return ""
    digest = hashlib.sha256()
    for path in files:
        name = path.relative_to(directory).as_posix().encode()
        data = path.read_bytes()
        # Lengths first: no two trees can run together into the same byte stream.
        digest.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def should_save(directory: Path, recorded: str) -> bool:
    now = fingerprint(directory)
    return bool(now) and now != recorded


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] not in ("record", "changed"):
        print("usage: python -m dsh_github_reviewer.ci.fingerprint record|changed DIR FILE",
              file=sys.stderr)
        return 2
    verb, directory, file = args[0], Path(args[1]), Path(args[2])
    if verb == "record":
        file.write_text(fingerprint(directory), encoding="utf-8")
        return 0
    try:
        recorded = file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        recorded = ""  # the restore step never ran: anything there now is new
    line = f"save={'true' if should_save(directory, recorded) else 'false'}"
    print(line)
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
