"""dsh-github-reviewer: a GitHub pull-request review bot, as a plugin of the dsh harness."""

__version__ = "0.1.0"
