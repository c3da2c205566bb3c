"""RetiredVersion: see runtime/models/__init__.py for what the models share, and
runtime/versions/services.py for how a version is retired."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class RetiredVersion(models.Model):
    """An agent version an operator retired once no unfinished task ran it: no task is
    submitted under it again (steward_submit() answers `retired`), whatever process still
    has its code. A version is code, not a tenant's: retiring it is the fleet's act.
    Kept as the record of who retired it and when."""

    id = models.BigAutoField(primary_key=True)
    agent = models.CharField(max_length=200)
    version = models.CharField(max_length=64)
    actor = models.CharField(max_length=200)
    retired_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_retired_version"
        # steward_submit() looks a submission's (agent, version) up here.
        constraints = [models.UniqueConstraint(fields=["agent", "version"], name="retired_version_once")]

    def __str__(self):
        return f"{self.agent} {self.version} (retired)"
