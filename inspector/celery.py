"""The Celery application. Configuration lives in settings under the CELERY_ prefix."""

import os

from celery import Celery

from inspector import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
# Celery's Django fix-up runs every system check when a worker starts, importing the whole URL
# configuration (with litellm at the top of chat/llm.py that was ~3 s; now ~0.06 s, measured). They
# run once per start, in `manage.py prepare`, before any worker, and a worker has nothing to add to
# them. Set CELERY_SKIP_CHECKS= (empty) to run them.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("inspector")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The tools app's tasks live with the rest of a call's life in the worker (tools/runtime/).
app.autodiscover_tasks(["tools.runtime"])
# Trace context in every task's headers; a worker exports spans when OTEL_EXPORTER_OTLP_ENDPOINT is set.
tracing.connect_celery()

