"""CI mode: ``dsh github-reviewer ci`` inside a GitHub Actions job (see ``action.yml``)."""
