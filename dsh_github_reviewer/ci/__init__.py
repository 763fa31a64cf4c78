"""CI mode: ``dsh github-reviewer ci`` inside a GitHub Actions job (see ``action.yml``): one
team review or ``/bot`` answer of the PR the job's event names, then exit.

A front end: may import ``app`` (it wires and connects the app itself) and every layer below.
"""
