"""Process and ProcessMinute: see runtime/fleet/."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Now


class Process(models.Model):
    """A worker or supervisor process, as it last reported itself (runtime/fleet/).

    Liveness is `seen_at`: a process beats every HEARTBEAT_SECONDS, so one not seen for a
    lease is gone, whatever it last said; a ghost never outlives its lease (a worker's
    attempts are judged by their own leases, not by this row). `counters` are the
    process's own cumulative counts since it started (steps journaled, effects committed,
    tasks recovered, ...), exported per process so that a restart is a counter reset.
    """

    name = models.CharField(primary_key=True, max_length=200)  # "worker:<host>:<pid>", "supervisor:..."
    kind = models.CharField(max_length=16)
    host = models.CharField(max_length=100)
    pid = models.IntegerField()
    queue = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField(db_default=Now())
    seen_at = models.DateTimeField(db_default=Now())
    stopped_at = models.DateTimeField(null=True, blank=True)
    last_sweep_at = models.DateTimeField(null=True, blank=True)  # a supervisor's, or a worker's beat-driven sweep
    counters = models.JSONField(default=dict)
    # What a worker serves: {"agent": ["version", ...]} (runtime/agents.py served()), as
    # it last said; read by operators and by "waiting for version" (runtime/tasks/selectors.py).
    versions = models.JSONField(default=dict, db_default={})

    class Meta:
        db_table = "steward_process"
        indexes = [models.Index(fields=["kind", "seen_at"], name="process_by_kind_seen")]

    def __str__(self):
        return f"{self.name} (seen {self.seen_at:%H:%M:%S})"


class ProcessMinute(models.Model):
    """What one process did in one minute: for the whole fleet (tenant ""), and for each
    tenant whose tasks it ran. The dashboard's charts sum these over processes, the
    fleet's rows or one tenant's, so an hour of history is at most 60 rows per process
    and tenant it served, whatever the volume."""

    minute = models.DateTimeField()
    process = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100, default="")  # "": the whole fleet's (fleet.services.FLEET)
    finished = models.IntegerField(default=0)  # attempts that ended their task: completed or failed
    failed = models.IntegerField(default=0)
    steps = models.IntegerField(default=0)
    # Seconds from queued to claimed: counts per bucket of runtime/meter.py WAIT_BOUNDS.
    waits = ArrayField(models.IntegerField(), default=list)

    class Meta:
        db_table = "steward_process_minute"
        constraints = [models.UniqueConstraint(fields=["minute", "process", "tenant"], name="process_minute_once")]
        # The fleet's or one tenant's last hour (runtime/sql/fleet_minutes.sql).
        indexes = [models.Index(fields=["tenant", "minute"], name="process_minute_tenant")]

    def __str__(self):
        return f"{self.process} {self.minute:%H:%M}: {self.finished} finished"
