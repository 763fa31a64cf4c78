"""The GraphQL subset github-mcp-server 0.12.1 sends for pending reviews, and the review-thread
query the reviewer sends for thread resolution.

Its client (githubv4) rejects answers whose shape differs from the selection set, so each
operation answers with exactly the fields the query selects. Behaviour follows GitHub:
``reviews(first: 1, author:)`` returns the author's *oldest* review, and a review thread whose
line is outside the diff is silently dropped (github/github-mcp-server#1214).
"""

from __future__ import annotations

import re
from typing import Any

from .sandbox_state import Review, SandboxState

OPERATIONS = {
    "pull_request_id": re.compile(r"repository\(owner: \$owner, name: \$repo\)\{pullRequest\("
                                  r"number: \$prNum\)\{id\}\}"),
    "add_review": re.compile(r"addPullRequestReview\(input: \$input\)\{pullRequestReview\{id\}\}"),
    "viewer": re.compile(r"^(query\s*)?\{\s*viewer\s*\{\s*login\s*\}\s*\}$"),
    "first_review": re.compile(r"reviews\(first: 1, author: \$author\)\{nodes\{id,state,url\}\}"),
    "add_thread": re.compile(r"addPullRequestReviewThread\(input: \$input\)\{thread\{id\}\}"),
    "submit": re.compile(r"submitPullRequestReview\(input: \$input\)\{pullRequestReview\{id\}\}"),
    "blob_sizes": re.compile(r"f0: object\(expression: \$e0\)"),
    "review_threads": re.compile(r"pullRequest\(number: \$number\) \{ reviewThreads\("
                                 r"first: (\d+), after: \$after\)"),
    "resolve_thread": re.compile(r"resolveReviewThread\(input: \$input\)"),
    "delete": re.compile(r"deletePullRequestReview\(input: \$input\)\{pullRequestReview\{id\}\}"),
}


_ALIAS = re.compile(r"(f\d+): object\(expression: \$(e\d+)\) \{ \.\.\. on Blob \{ byteSize \} \}")


class GraphQLError(Exception):
    pass


def _pr_from_node(state: SandboxState, node_id: str) -> tuple[str, int]:
    m = re.match(r"^PR_(\d+)_(\d+)$", node_id or "")
    if not m:
        raise GraphQLError(f"Could not resolve to a node with the global id of '{node_id}'")
    repo_id, number = int(m.group(1)), int(m.group(2))
    for repo in state.repos.values():
        if repo.id == repo_id:
            return repo.full_name, number
    raise GraphQLError(f"Could not resolve to a node with the global id of '{node_id}'")


def _review_from_node(state: SandboxState, node_id: str) -> Review:
    m = re.match(r"^PRR_(\d+)$", node_id or "")
    for r in state.reviews:
        if m and r.id == int(m.group(1)):
            return r
    raise GraphQLError(f"Could not resolve to a node with the global id of '{node_id}'")


def execute(state: SandboxState, base_url: str, login: str, body: dict[str, Any]
            ) -> dict[str, Any]:
    query = body.get("query", "")
    variables = body.get("variables") or {}
    op = next((name for name, rx in OPERATIONS.items() if rx.search(query)), None)
    if op == "review_threads":
        variables = {**variables, "_first": int(OPERATIONS[op].search(query).group(1))}
    if op == "blob_sizes":
        variables = {**variables, "_aliases": _ALIAS.findall(query)}
    if op is None:
        return {"errors": [{"message": "sandbox: unsupported GraphQL operation"}]}
    try:
        with state.lock:
            return {"data": _run(state, base_url, login, op, variables)}
    except GraphQLError as exc:
        return {"errors": [{"message": str(exc)}]}
    except KeyError as exc:
        return {"errors": [{"message": f"Could not resolve to a Repository: {exc}"}]}


def _run(state: SandboxState, base_url: str, login: str, op: str,
         v: dict[str, Any]) -> dict[str, Any]:
    if op == "viewer":
        return {"viewer": {"login": state.user(login).login}}
    if op == "pull_request_id":
        pr = state.pull(f"{v['owner']}/{v['repo']}", int(v["prNum"]))
        return {"repository": {"pullRequest": {
            "id": f"PR_{state.repo(pr.repo).id}_{pr.number}"}}}
    if op == "first_review":
        full = f"{v['owner']}/{v['name']}"
        state.pull(full, int(v["prNum"]))
        mine = [r for r in state.reviews_of(full, int(v["prNum"]))
                if r.user.lower() == str(v["author"]).lower()]
        nodes = [{"id": f"PRR_{r.id}", "state": r.state,
                  "url": f"{base_url}/{r.repo}/pull/{r.number}#pullrequestreview-{r.id}"}
                 for r in mine[:1]]
        return {"repository": {"pullRequest": {"reviews": {"nodes": nodes}}}}
    if op == "review_threads":
        return _review_threads(state, v)
    if op == "blob_sizes":
        return _blob_sizes(state, v)
    inp = v.get("input") or {}
    if op == "resolve_thread":
        return _resolve_thread(state, login, inp)
    if op == "add_review":
        full, number = _pr_from_node(state, inp.get("pullRequestId", ""))
        if any(r.user.lower() == login.lower() and r.state == "PENDING"
               for r in state.reviews_of(full, number)):
            raise GraphQLError("User can only have one pending review per pull request")
        review = state.start_review(full, number, state.user(login).login, inp.get("commitOID"),
                                    inp.get("body") or "")
        return {"addPullRequestReview": {"pullRequestReview": {"id": f"PRR_{review.id}"}}}
    review = _review_from_node(state, inp.get("pullRequestReviewId", ""))
    if review.user.lower() != login.lower():
        raise GraphQLError("Review not found for the viewer")
    if op == "add_thread":
        if review.state != "PENDING":
            raise GraphQLError("Review is not pending")
        path, line = inp.get("path", ""), inp.get("line")
        side = inp.get("side") or "RIGHT"
        files = {f.filename: f for f in state.diff(review.repo, review.number)}
        subject = inp.get("subjectType") or "LINE"
        in_diff = path in files and (subject == "FILE" or (
            isinstance(line, int) and files[path].lines.allows(side, line)))
        if not in_diff:
            return {"addPullRequestReviewThread": {"thread": None}}
        c = state.add_review_comment(
            review.repo, review.number, review.user, inp.get("body", ""), path=path,
            line=line if subject == "LINE" else None, side=side if subject == "LINE" else None,
            review_id=review.id, start_line=inp.get("startLine"),
            start_side=inp.get("startSide"), subject_type=subject)
        return {"addPullRequestReviewThread": {"thread": {"id": f"PRRT_{c.id}"}}}
    if op == "submit":
        if review.state != "PENDING":
            raise GraphQLError("Review is not pending")
        event = inp.get("event")
        if event not in ("COMMENT", "APPROVE", "REQUEST_CHANGES"):
            raise GraphQLError(f"invalid event {event!r}")
        state.submit_review(review, event, inp.get("body"))
        return {"submitPullRequestReview": {"pullRequestReview": {"id": f"PRR_{review.id}"}}}
    if op == "delete":
        if review.state != "PENDING":
            raise GraphQLError("Can not delete a non-pending review")
        state.reviews.remove(review)
        state.review_comments[:] = [c for c in state.review_comments
                                    if c.review_id != review.id]
        return {"deletePullRequestReview": {"pullRequestReview": {"id": f"PRR_{review.id}"}}}
    raise GraphQLError(f"unsupported operation {op}")


def _resolve_thread(state: SandboxState, login: str, inp: dict[str, Any]) -> dict[str, Any]:
    """``resolveReviewThread(input: {threadId})``: the thread's id is ``PRRT_<root id>``."""
    m = re.match(r"^PRRT_(\d+)$", str(inp.get("threadId") or ""))
    root = next((c for c in state.review_comments if m and c.id == int(m.group(1))
                 and c.in_reply_to is None), None)
    if root is None:
        raise GraphQLError(f"Could not resolve to a node with the global id of "
                           f"'{inp.get('threadId')}'")
    if root.id not in state.resolved_threads:
        state.resolve_thread(root.id, state.user(login).login)
    return {"resolveReviewThread": {"thread": {"id": f"PRRT_{root.id}", "isResolved": True}}}


def _review_threads(state: SandboxState, v: dict[str, Any]) -> dict[str, Any]:
    """Threads of a PR, oldest first, paged by an opaque cursor (here: an offset)."""
    full = f"{v['owner']}/{v['name']}"
    pr = state.pull(full, int(v["number"]))
    visible = {r.id for r in state.reviews_of(full, pr.number) if r.state != "PENDING"}
    roots = [c for c in state.review_comments_of(full, pr.number)
             if c.in_reply_to is None and (c.review_id is None or c.review_id in visible)]
    files = {f.filename: f for f in state.diff(full, pr.number)}
    start = int(v.get("after") or 0)
    chunk = roots[start: start + v["_first"]]
    nodes = []
    for c in chunk:
        f = files.get(c.path)
        outdated = f is None or (c.line is not None and not f.lines.allows(c.side or "RIGHT",
                                                                           c.line))
        resolver = state.resolved_threads.get(c.id)
        nodes.append({"id": f"PRRT_{c.id}", "isResolved": resolver is not None,
                      "isOutdated": outdated,
                      "resolvedBy": {"login": state.user(resolver).login} if resolver else None,
                      "comments": {"nodes": [{"databaseId": c.id}]}})
    end = start + len(chunk)
    return {"repository": {"pullRequest": {"reviewThreads": {
        "pageInfo": {"hasNextPage": end < len(roots), "endCursor": str(end) if chunk else None},
        "nodes": nodes}}}}


def _blob_sizes(state: SandboxState, v: dict[str, Any]) -> dict[str, Any]:
    """``object(expression: "<sha>:<path>") { ... on Blob { byteSize } }`` per alias."""
    full = f"{v['owner']}/{v['name']}"
    state.repo(full)
    out: dict[str, Any] = {}
    for alias, var in v["_aliases"]:
        sha, _, path = str(v.get(var, "")).partition(":")
        commit = state.commits.get(sha)
        text = commit.tree.get(path) if commit else None
        out[alias] = {"byteSize": len(text.encode())} if text is not None else None
    return {"repository": out}
