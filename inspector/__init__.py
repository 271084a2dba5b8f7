"""The project package: settings, ASGI application, URLs, Celery app, and the server-inspection UI."""

from .celery import app as celery_app

__all__ = ["celery_app"]
