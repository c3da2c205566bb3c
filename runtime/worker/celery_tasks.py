"""Celery adapters: take ids, call one runtime function, return. A lost, duplicated or
late message is harmless because PostgreSQL decides what runs."""

from celery import shared_task
from celery.signals import worker_shutting_down

from runtime import db, outages
from runtime.worker import executor, supervisor


@worker_shutting_down.connect
def _stop_draining(**_):
    executor.stop_draining()


@shared_task(name="runtime.run_pool", ignore_result=True)
def run_pool(pool: str) -> int:
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
    return report
