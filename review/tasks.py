"""Celery tasks of the review app."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from inspector import logs
from review import loadtest
from review.models import LoadRun

log = logging.getLogger(__name__)


@shared_task(name="review.tasks.run_load_test")
def run_load_test(run_id: str) -> str:
    """Drive a load test (review/loadtest.py `drive`) on this worker. acks_late like every task: a
    worker that dies mid-run has the task redelivered, and the driver carries on from what the run
    already started."""
    try:
        with logs.context(call_id=f"load:{run_id}"):
            return loadtest.drive(run_id)
    except LoadRun.DoesNotExist:
        return "gone"
    except Exception as exc:  # noqa: BLE001 - the run page shows why it stopped
        log.exception("load test %s failed", run_id)
        LoadRun.objects.filter(pk=run_id).update(status=LoadRun.Status.FAILED, error=str(exc)[:2000],
                                                 finished_at=timezone.now())
        return "failed"
