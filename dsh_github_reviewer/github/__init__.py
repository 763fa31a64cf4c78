"""The reviewer's contact with GitHub: auth, REST client, payload models, MCP host, guard, and
the account in its two stages (``account``: configured, then connected).

May import ``config`` and ``core``; nothing above (no turn, review or work logic).
"""
