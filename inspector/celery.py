"""The Celery application. Configuration lives in settings under the CELERY_ prefix."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")

app = Celery("inspector")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
