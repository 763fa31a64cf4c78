"""Commit history for the sandbox's compare endpoint: merge bases and tree diffs.

``GET /repos/{o}/{r}/compare/{base}...{head}`` compares ``head`` with the merge base of the two
commits, like GitHub's three-dot comparison: after a force-push the old head is not an
ancestor of the new one, the status is ``diverged``, and the files are those changed since the
merge base — not the content difference between the two heads.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sandbox_state import FileDiff, SandboxState, _patch


def ancestry(state: SandboxState, sha: str) -> list[str]:
    """``sha`` and its ancestors, newest first (sandbox commits have one parent)."""
    out: list[str] = []
    cur: str | None = sha
    while cur is not None:
        out.append(cur)
        cur = state.commits[cur].parent
    return out


def tree_diff(old: dict[str, str], new: dict[str, str]) -> list[FileDiff]:
    out = []
    for path in sorted(set(old) | set(new)):
        if path in new and path not in old:
            patch, adds, dels = _patch("", new[path])
            out.append(FileDiff(path, "added", None, patch, adds, dels, "", new[path]))
        elif path in old and path not in new:
            patch, adds, dels = _patch(old[path], "")
            out.append(FileDiff(path, "removed", None, patch, adds, dels, old[path], ""))
        elif old[path] != new[path]:
            patch, adds, dels = _patch(old[path], new[path])
            out.append(FileDiff(path, "modified", None, patch, adds, dels, old[path],
                                new[path]))
    return out


@dataclass
class Comparison:
    status: str
    ahead_by: int
    behind_by: int
    base: str
    merge_base: str
    commits: list[str]  # merge base (exclusive) .. head, oldest first
    files: list[FileDiff]


def compare(state: SandboxState, base: str, head: str) -> Comparison:
    """Three-dot comparison of two commit SHAs; ``KeyError`` when either is unknown."""
    base_line, head_line = ancestry(state, base), ancestry(state, head)
    in_base = set(base_line)
    merge_base = next((s for s in head_line if s in in_base), None)
    if merge_base is None:
        raise KeyError(f"no common ancestor of {base} and {head}")
    ahead = head_line[: head_line.index(merge_base)]
    behind = base_line[: base_line.index(merge_base)]
    status = ("identical" if not ahead and not behind else "ahead" if not behind
              else "behind" if not ahead else "diverged")
    files = tree_diff(state.commits[merge_base].tree, state.commits[head].tree)
    return Comparison(status, len(ahead), len(behind), base, merge_base, ahead[::-1], files)
