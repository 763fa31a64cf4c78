"""Durable per-PR work: records, inbox, scheduler and the PR procedures.

* ``records`` — the stored layout (one record per PR, one per account, instructions by hash).
* ``store`` — reads/writes of one account's records; ``domain_spec()`` with the v1 migration.
* ``inbox`` — ``Inbox.record(Observations)``: observed work and feed marks in one write.
* ``scheduler`` — ``Scheduler.wake(account, keys)`` runs due PR work with bounded turns.
* ``worker``, ``review``, ``chat``, ``notices`` — the work of one PR.
* ``context`` — what a PR procedure is given: the connected account, its store, its
  ``Reviewer`` (single or team, chosen by the app) and a clock.

Webhook deliveries (or any other source) record work exactly as a poll does, through the
account's ``Inbox``, then wake the scheduler (``app.service`` wires both)::

    keys = await inbox.record(Observations(repo="owner/repo", pulls=[...], comments=[...]))
    scheduler.wake(account_key, keys)

May import ``reviewers`` (their interface), ``turn``, ``pr_output``, ``github``, ``config`` and
``core``; never ``sources``, ``app`` or above.
"""
