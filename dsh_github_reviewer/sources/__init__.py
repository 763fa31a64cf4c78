"""Where work comes from: the poll loop of each account (``poll``), the repositories it watches,
and GitHub's webhook deliveries (``webhook``). Sources only *record* work through ``work``'s
inbox; they never run it.

May import ``work`` and everything below it.
"""
