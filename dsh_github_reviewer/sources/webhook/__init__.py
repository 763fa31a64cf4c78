"""The webhook trigger: GitHub tells the bot about a push or a ``/bot`` at once.

A delivery only *records* work — the same PR work a poll would record — and wakes the
scheduler; it never runs a second review path. Polling continues at ``reconcile_interval_s``
and catches whatever a lost delivery missed. Its config block,
``[plugins.github-reviewer.webhook]``, is ``config.webhook``. Modules, one concern each:

* ``signature``  — ``X-Hub-Signature-256`` verification, constant time, before any parsing
* ``events``     — the deliveries the reviewer acts on, as pydantic models
* ``deliveries`` — delivery ids already handled (bounded, durable), so a redelivery is a no-op
* ``receiver``   — the ASGI app: verify, parse, pick the account, record, answer
* ``sink``       — what a delivery records, through the account's ``Inbox`` like a poll
* ``server``     — its own uvicorn listener, apart from the web UI
* ``status``     — what ``status`` and the web UI show of the receivers

The receivers are started by the composition root (``app/webhooks.py``), which wires them to
each account's inbox and scheduler.
"""
