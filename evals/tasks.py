"""Celery tasks of the evals (queue `default`): a run's advance and an attempt's grading
(evals/runs.py). Importing this module (Celery's autodiscovery does, in every worker) adds
stalled eval runs to the workers' periodic sweep."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from chat import sweeper
from evals import runs
from evals.models import Attempt

log = logging.getLogger(__name__)


@shared_task(name="evals.tasks.advance_run")
def advance_run(run_id: int, tick: int) -> str:
    return runs.advance(run_id, tick)


@shared_task(name="evals.tasks.grade_attempt")
def grade_attempt(attempt_id: int) -> str:
    try:
        return runs.grade(attempt_id)
    except Exception as exc:  # noqa: BLE001 - an attempt must end; the worker log has the traceback
        log.exception("grading attempt %s failed", attempt_id)
        Attempt.objects.filter(pk=attempt_id, status=Attempt.Status.EVALUATING).update(
            status=Attempt.Status.ERROR, error=f"Grading failed: {exc.__class__.__name__}", finished_at=timezone.now())
        return "error"


sweeper.register("eval runs", runs.resume_stalled_runs)
