"""A process's heartbeat: every HEARTBEAT_SECONDS it tells PostgreSQL it is alive and
what it did since the last beat (runtime/meter.py, runtime/fleet/services.py).

Workers beat from a daemon thread of their own (started when the Celery worker is
ready, so an idle worker is seen too, not only one holding a lease); a supervisor beats
after each sweep. A worker's first sweep (Celery beat sends sweeps to the workers)
nudges its heartbeat to beat at once: otherwise a fleet just started would read as
"never swept" for up to a heartbeat interval. A beat that fails during a database outage is skipped, and what it
would have reported is carried into the next beat.
"""

from __future__ import annotations

import logging
import threading

from django.db import connection

from runtime import config, db, outages
from runtime.fleet.services import process_beat, process_stopped
from runtime.meter import Counted, meter

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(self, kind: str, *, queue: str = ""):
        self.kind = kind
        self.queue = queue
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop() and nudge(): beat now
        self._thread: threading.Thread | None = None
        self._carried: tuple[dict, list[int], dict] | None = None  # what a failed beat could not write

    def beat(self, *, swept: bool = False) -> None:
        totals, fresh, waits, tenants = meter.take()
        if self._carried is not None:
            old_fresh, old_waits, old_tenants = self._carried
            fresh = {k: fresh.get(k, 0) + old_fresh.get(k, 0) for k in {*fresh, *old_fresh}}
            waits = [a + b for a, b in zip(waits, old_waits, strict=True)]
            for tenant, minute in old_tenants.items():
                tenants.setdefault(tenant, Counted()).add(minute)
            self._carried = None
        # Twice at most: a pooled connection that was cut (its backend terminated, the
        # server restarted since) fails once while the database is there, and a fresh
        # one then works. Only a beat that fails on a fresh connection is an outage;
        # otherwise one cut would be logged as an outage by each thread that held a
        # connection, after the first had already logged it over. (A beat whose commit
        # landed just before its connection was cut is counted twice: these are
        # per-minute figures for a chart, not state.)
        for fresh_connection in (False, True):
            try:
                process_beat(
                    kind=self.kind,
                    totals=totals,
                    fresh=fresh,
                    waits=waits,
                    tenants=tenants,
                    queue=self.queue,
                    swept=swept or bool(fresh.get("sweeps")),
                )
                return
            except db.CONNECTION_ERRORS as exc:
                db.discard_connection()
                if fresh_connection:
                    self._carried = (fresh, waits, tenants)
                    outages.database.failed(exc)

    def start(self) -> None:
        """Beat from a daemon thread until stop()."""
        self._thread = threading.Thread(target=self._run, name=f"steward-{self.kind}-heartbeat", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """Beat now rather than at the end of the interval (from any thread)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.beat()
            process_stopped(kind=self.kind)
        except db.CONNECTION_ERRORS:
            pass  # the row ages out instead
        finally:
            connection.close()

    def _run(self) -> None:
        try:
            self.beat()
            while True:
                self._wake.wait(config.heartbeat_seconds())
                self._wake.clear()
                if self._stop.is_set():
                    break
                self.beat()
                connection.close()  # back to the pool between beats (see the lease keeper)
        except Exception:
            log.exception("the %s heartbeat stopped", self.kind)
        finally:
            connection.close()
