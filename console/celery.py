"""The Celery app. Celery carries hints between processes; PostgreSQL decides what runs."""

import os

from celery import Celery, bootsteps
from click import Option
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("steward")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runtime.worker"], related_name="celery_tasks")


# `celery worker --attempts N`: how many attempts this worker process runs at once (the
# dense worker, runtime/worker/dense.py); STEWARD_WORKER_ATTEMPTS says the same, and the
# option wins. Celery keeps the solo pool either way: it only delivers wake-ups.
app.user_options["worker"].add(
    Option(
        ("--attempts",),
        type=int,
        default=None,
        help="Attempts this worker process runs at once (default: STEWARD_WORKER_ATTEMPTS, else 1).",
    )
)


class Attempts(bootsteps.Step):
    def __init__(self, parent, attempts=None, **options):
        super().__init__(parent, **options)
        if attempts is not None:
            if attempts < 1:
                raise ValueError(f"--attempts must be at least 1, not {attempts}")
            from runtime.worker import dense

            dense.configure(attempts)


app.steps["worker"].add(Attempts)


class NoSigningKey(bootsteps.Step):
    """A worker runs agent code, so it never holds the key that signs capability tokens
    (docs/adr/0034-token-minting.md): one that would is refused as it is built, before it
    takes any work (a bootstep's error stops the worker; a signal handler's is only logged)."""

    def __init__(self, parent, **options):
        super().__init__(parent, **options)
        from django.conf import settings

        if settings.STEWARD["CAPABILITY_KEY"] is not None:
            raise ImproperlyConfigured(
                "this Celery worker holds STEWARD_CAPABILITY_KEY: start workers with STEWARD_PROCESS=worker and "
                "STEWARD_WORKER_CREDENTIAL, and give the signing key to the web process alone (docs/deploy.md)"
            )


app.steps["worker"].add(NoSigningKey)
