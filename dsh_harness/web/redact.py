"""The web UI's redaction is the harness's (``dsh_harness.redact``): one list of configured
secrets and one set of encoded forms for session logs, model requests and pages alike."""

from ..redact import MIN_SECRET, REDACTED, Redactor, encoded_forms

__all__ = ["MIN_SECRET", "REDACTED", "Redactor", "encoded_forms"]
