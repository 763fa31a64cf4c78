"""The harness's built-in behaviour, written as ordinary plugins of the ``dsh`` hooks.

Like datasette's ``DEFAULT_PLUGINS``: the core has no private path; a built-in can be blocked
(``disable_plugins`` / ``DSH_DISABLE_PLUGINS``) and replaced by a third-party plugin.
"""

DEFAULT_PLUGINS: list[tuple[str, str]] = [
    ("dsh.storage.json", "dsh_harness.default_plugins.storage_json"),
    ("dsh.storage.sqlite", "dsh_harness.default_plugins.storage_sqlite"),
    ("dsh.storage.postgres", "dsh_harness.default_plugins.storage_postgres"),
    ("dsh.sessions.jsonl", "dsh_harness.default_plugins.sessions_jsonl"),
    ("dsh.sessions.postgres", "dsh_harness.default_plugins.sessions_postgres"),
    ("dsh.llm.openai", "dsh_harness.default_plugins.llm_openai"),
    ("dsh.replicas", "dsh_harness.default_plugins.replicas"),
    ("dsh.web", "dsh_harness.default_plugins.web"),
]
