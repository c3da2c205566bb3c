"""Watching a pool's concurrency from PostgreSQL while real workers run it
(tests/integration/test_limits.py, test_wake_burst.py).

A sampler thread reads the held Slot rows, running tasks, live attempts, sleeping tasks
and slots held by tasks that are not running from PostgreSQL in one snapshot per sample
(what the runtime believes); the fake service, if there is one, counts the requests in
flight at once (what the outside world sees).
"""

from __future__ import annotations

import threading

from django.db import connection

from runtime.attempts import dispatch

# One statement, so the counts come from one snapshot.
USAGE_SQL = """
SELECT (SELECT count(*) FROM steward_slot s WHERE s.pool = %(pool)s AND s.task_id IS NOT NULL),
       (SELECT count(*) FROM steward_task t WHERE t.pool = %(pool)s AND t.status = 'running'),
       (SELECT count(*) FROM steward_attempt a JOIN steward_task t ON t.id = a.task_id
        WHERE t.pool = %(pool)s AND a.ended_at IS NULL),
       (SELECT count(*) FROM steward_task t WHERE t.pool = %(pool)s AND t.status = 'sleeping'),
       (SELECT count(*) FROM steward_slot s JOIN steward_task t ON t.id = s.task_id
        WHERE s.pool = %(pool)s AND t.status <> 'running')
"""


def usage(pool: str) -> tuple[int, int, int, int, int]:
    """(held slots, running tasks, live attempts, sleeping tasks, slots held by a task
    that is not running) of `pool`, one snapshot."""
    with connection.cursor() as cur:
        cur.execute(USAGE_SQL, {"pool": pool})
        return cur.fetchone()


class Sampler:
    """Samples a pool's concurrency on its own thread (and its own DB connection) until
    the `with` block ends: (held slots, running tasks, live attempts, fake.active, slots
    held by a task not running); fake.active is 0 without a fake service.

    With `pressure=True` it also sends a wake-up for the pool every fifth sample.
    Wake-ups are hints and a duplicate is harmless by design (runtime/attempts/dispatch.py), but
    without them a worker that found no free slot goes idle and the limit would hold
    only because fewer workers were trying: with them, every worker keeps claiming.
    """

    def __init__(self, pool: str, fake=None, *, pressure: bool = False):
        self.pool, self.fake, self.pressure = pool, fake, pressure
        self.samples: list[tuple[int, int, int, int, int]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="limit-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the sampler did not stop"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                held, running, attempts, _, held_not_running = usage(self.pool)
                active = self.fake.active if self.fake is not None else 0
                self.samples.append((held, running, attempts, active, held_not_running))
                if self.pressure and len(self.samples) % 5 == 0:
                    dispatch.send(self.pool)
                self._stop.wait(0.002)  # a sampling interval, not a wait for an event
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def peak(self, column: int) -> int:
        return max(sample[column] for sample in self.samples)
