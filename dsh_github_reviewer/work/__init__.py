"""Durable per-PR work: records, inbox, scheduler and the PR procedures.

* ``records`` — the stored layout (one record per PR, one per account, instructions by hash).
* ``store`` — reads/writes of one account's records; ``domain_spec()`` with the v1 migration.
* ``inbox`` — ``Inbox.record(Observations)``: observed work and feed marks in one write.
* ``scheduler`` — ``Scheduler.wake(account, keys)`` runs due PR work with bounded turns.
* ``worker``, ``review``, ``chat``, ``notices`` — the work of one PR.
* ``service`` — wires accounts, poll loops and the scheduler for ``dsh run``.

Webhook deliveries (or any other source) record work exactly as a poll does::

    acct = ReviewerApp.of(harness).accounts[account_key]
    keys = await acct.inbox.record(Observations(repo="owner/repo", pulls=[...],
                                                comments=[...]))
    app.work.scheduler.wake(account_key, keys)
"""
