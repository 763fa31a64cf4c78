"""The lowest layer: pure helpers every other package may use — untrusted-text sanitizing,
session ids of PR conversations, comment-command parsing, the clock.

May import nothing of this package but ``core`` itself (and ``dsh_harness`` public names).
"""
