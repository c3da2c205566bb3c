"""Steward's web side: settings, urls, the HTTP API, the console, admin and the Celery app."""

from console.celery import app as celery_app

__all__ = ["celery_app"]
