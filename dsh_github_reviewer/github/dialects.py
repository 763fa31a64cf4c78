"""Map the model's stable read tools onto what the configured github-mcp-server offers.

Current servers consolidate PR reads into ``pull_request_read(method=...)``; 0.12.x has one tool
per read (``get_pull_request``, ``get_pull_request_diff``, …). The dialect is detected from the
server's tool list, so the model always sees the same tools whatever the version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .guard_rules import Scope
from .mcp_host import ToolInfo

LEGACY_READS = {
    "get": "get_pull_request",
    "get_diff": "get_pull_request_diff",
    "get_files": "get_pull_request_files",
    "get_status": "get_pull_request_status",
}


class DialectError(Exception):
    pass


@dataclass(frozen=True)
class Dialect:
    name: str  # "current" | "legacy"
    tools: frozenset[str]

    def pr_read(self, method: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(server tool, server args) for ``pull_request_read`` with a validated method."""
        if self.name == "current":
            return "pull_request_read", {**args, "method": method}
        tool = LEGACY_READS.get(method)
        if tool is None or tool not in self.tools:
            raise DialectError(
                f"method {method} is not available on this github-mcp-server version "
                f"(0.12.x); use get_status for the commit status instead"
                if method == "get_check_runs" else
                f"method {method} is not available on this github-mcp-server version")
        return tool, args

    def file_read(self, args: dict[str, Any], scope: Scope) -> tuple[str, dict[str, Any]]:
        """(server tool, server args) for validated ``get_file_contents`` arguments.

        0.12.x resolves ``sha`` reads through the default branch (a file the PR adds is "not
        found") and cannot take a SHA as ``ref``; measured against the sandbox. So head-side
        reads go through the base repository's ``refs/pull/<n>/head``, and a base SHA given
        as ``ref`` becomes ``sha`` (exact for files that exist on the default branch).
        """
        if self.name != "legacy":
            return "get_file_contents", args
        if scope.head_sha in (args.get("sha"), args.get("ref")):
            return "get_file_contents", {"owner": scope.owner, "repo": scope.repo,
                                         "path": args["path"],
                                         "ref": f"refs/pull/{scope.number}/head"}
        if args.get("ref") == scope.base_sha:
            return "get_file_contents", {"owner": args["owner"], "repo": args["repo"],
                                         "path": args["path"], "sha": scope.base_sha}
        return "get_file_contents", args


def detect(tools: Mapping[str, ToolInfo]) -> Dialect:
    names = frozenset(tools)
    if "get_file_contents" not in names:
        raise DialectError("github-mcp-server offers no get_file_contents tool; check "
                           "mcp.args (the repos toolset is needed)")
    if "pull_request_read" in names:
        return Dialect("current", names)
    if "get_pull_request" in names:
        return Dialect("legacy", names)
    raise DialectError("github-mcp-server offers neither pull_request_read nor "
                       "get_pull_request; check mcp.args (the pull_requests toolset is needed)")
