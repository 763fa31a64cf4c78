"""What a review turn is made of: the trusted instructions, the prompts, the prepared diff and
interdiff, people's feedback on the bot's threads, answers already in a session's log.

May import ``core``, ``config`` and ``github``; never ``work``, ``reviewers`` or above.
"""
