"""The Celery app. Celery carries hints between processes; PostgreSQL decides what runs."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("steward")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runtime.worker"], related_name="celery_tasks")
