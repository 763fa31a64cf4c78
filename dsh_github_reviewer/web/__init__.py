"""The reviewer's pages in the harness's web UI: the PR index, the status page and the PR page
(the reviews as posted). Read-only views of what the bot stored.

May import ``app``'s read helpers, ``work``'s records and everything below.
"""
