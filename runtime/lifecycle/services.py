"""The lifecycle's actions, as the web side and the CLI call them: retention periods,
the retention job, erasure by subject (docs/adr/0038-erasure-lifecycle.md)."""

from runtime.lifecycle.erasure import Subject, erasure_run
from runtime.lifecycle.retention import retention_run, retention_set

__all__ = ["Subject", "erasure_run", "retention_run", "retention_set"]
