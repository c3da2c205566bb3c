"""Health: is each part of Steward answering.

No token: a load balancer or an orchestrator's probe has none, and checking a token
needs the database, which is one of the things this reports on. So it says only what a
probe needs (each part up or not, how long ago the last sweep ran and on which process, how many workers
are alive), nothing about any tenant.
"""

from __future__ import annotations

from datetime import datetime

from ninja import Router, Schema, Status
from pydantic import Field

from runtime.fleet.selectors import health as fleet_health

router = Router(tags=["health"])


class HealthOut(Schema):
    ok: bool = Field(description="database and broker answer, a supervisor swept lately, a worker is alive")
    database: bool
    database_ms: float | None
    broker: bool
    broker_ms: float | None
    last_sweep_at: datetime | None
    sweep_age_seconds: float | None
    live_workers: int
    live_supervisors: int
    last_sweep_by: str | None = Field(
        description="the process that made the last sweep: a `steward supervise` "
        "process (supervisor:...) or a worker running Celery beat's sweep (worker:...)"
    )


@router.get("/health", auth=None, response={200: HealthOut, 503: HealthOut}, summary="Health")
def health(request):
    """200 when every part is well, 503 (with the same body) when one is not."""
    h = fleet_health()
    body = {
        "ok": h.ok,
        "database": h.database_ms is not None,
        "database_ms": h.database_ms,
        "broker": h.broker_ms is not None,
        "broker_ms": h.broker_ms,
        "last_sweep_at": h.last_sweep_at,
        "sweep_age_seconds": h.sweep_age_seconds,
        "live_workers": h.live_workers,
        "live_supervisors": h.live_supervisors,
        "last_sweep_by": h.last_sweep_by,
    }
    return Status(200 if h.ok else 503, body)
