"""What people see on a pull request besides the review itself: ``/bot`` replies and the other
comments the bot posts, each findable by its hidden marker.

May import ``github``, ``config`` and ``core``.
"""
