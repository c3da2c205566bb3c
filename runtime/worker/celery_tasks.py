"""Celery adapters: take ids, call one runtime function, return. A lost, duplicated or
late message is harmless because PostgreSQL decides what runs."""

from celery import shared_task
from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutdown, worker_shutting_down

from runtime import config, db, outages
from runtime.worker import dense, executor, supervisor
from runtime.worker.heartbeat import Heartbeat
from runtime.worker.stop_watch import watch

# The worker process's heartbeat (runtime/worker/heartbeat.py), once Celery is ready.
_heartbeat: list[Heartbeat] = []
_swept: list[bool] = []  # whether this process has swept yet


@worker_init.connect
@worker_process_init.connect
def _watch_stops(**_):
    # The solo pool's process and each prefork child run attempts: a stop is delivered
    # into their running step, and a step that ignores it ends the process after the
    # grace (runtime/worker/stop_watch.py; a prefork child is replaced by the master).
    watch.enable(force_exit=True)
    # STEWARD_WORKER_ATTEMPTS > 1: a dense worker (runtime/worker/dense.py). The
    # `--attempts` option, read later as the worker is built, overrides it (console/celery.py).
    dense.configure(config.worker_attempts())


@worker_ready.connect
def _start_heartbeat(**_):
    beat = Heartbeat("worker", queue=config.queue_name())
    beat.start()
    _heartbeat.append(beat)


@worker_shutting_down.connect
def _stop_draining(**_):
    executor.stop_draining()


@worker_shutdown.connect
def _stop_heartbeat(**_):
    # After the attempt in hand has ended: until then the worker is still working. A
    # dense worker's attempts run in threads of their own: wait for them to end.
    places = dense.places()
    if places is not None:
        places.join()
    for beat in _heartbeat:
        beat.stop()


@shared_task(name="runtime.run_pool", ignore_result=True)
def run_pool(pool: str) -> int:
    if dense.places() is not None:
        return dense.wake(pool)  # a thread in a free place drains it; this returns at once
    return executor.run_pool(pool=pool)


@shared_task(name="runtime.sweep", ignore_result=True)
def sweep() -> dict:
    # Beat sends one of these every SWEEP_SECONDS: during a database outage each would
    # fail, so log the outage once instead of a traceback per sweep. The next one retries.
    try:
        report = supervisor.sweep(supervisor_id=f"beat@{executor.worker_id()}").as_dict()
    except db.CONNECTION_ERRORS as exc:
        db.discard_connection()
        outages.database.failed(exc)
        return {}
    outages.database.recovered()
    if not _swept:  # this worker's first sweep: say so now, not at the next beat
        _swept.append(True)
        for beat in _heartbeat:
            beat.nudge()
    return report
