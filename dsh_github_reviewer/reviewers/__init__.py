"""Who reviews: the single reviewer (``single``) and the review team (``team``) — two strategies of
one interface, chosen once when the app is wired.

May import ``turn``, ``pr_output``, ``github``, ``config`` and ``core``; never ``work`` or above.
"""
