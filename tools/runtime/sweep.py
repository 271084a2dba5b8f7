"""The sweep: no tool call stays `queued` or `running` past its deadline, whatever failed.

A task can be lost (the broker was down when it was sent, a worker died between a chat
step's commit and its chord), a worker can die mid-call (SIGKILL: its message waits in the
broker for the visibility timeout), and storing a result can fail for good. Workers run
this sweep every SWEEP_INTERVAL seconds (see chat/sweeper.py), so every call ends:

- queued, its task last sent more than CALL_RESEND_AFTER ago: the task is sent again
  (deliveries are idempotent, a duplicate is skipped);
- queued for longer than CALL_QUEUE_DEADLINE (since it was created, or since it was queued
  again: then its `deadline_at` says until when): failed, "no worker started it";
- running past its deadline (`deadline_at`: connect + the call's own timeout + margin, pushed
  on by progress; see tools/runtime/deadlines.py) with attempts left: queued again and re-sent; with
  none left: failed. Ending publishes the usual event, so pages update.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from tools.models import ServerRequest, ToolCall
from tools.runtime.deadlines import expired as past_deadline
from tools.runtime.input_rounds import close_open_requests
from tools.runtime.lifecycle import dispatch
from tools.runtime.pipeline import MAX_ATTEMPTS, end_call

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    resent: int = 0
    ended: int = 0


def sweep_calls(now: datetime | None = None) -> SweepReport:
    now = now or timezone.now()
    report = SweepReport()
    queued_deadline = now - timedelta(seconds=settings.CALL_QUEUE_DEADLINE)
    # A call queued again after its input was answered has its own deadline (tools/runtime/input_rounds.py).
    waited_too_long = Q(deadline_at__isnull=True, queued_at__lt=queued_deadline) | Q(deadline_at__lt=now)
    for call in ToolCall.objects.filter(waited_too_long, status=ToolCall.Status.QUEUED).only("pk"):
        waited = settings.CALL_QUEUE_DEADLINE
        if end_call(call.pk, ToolCall.Status.FAILED, f"No worker started this call within {waited:g} s (is a Celery worker running?)."):
            report.ended += 1

    resend_before = now - timedelta(seconds=settings.CALL_RESEND_AFTER)
    lost = (
        ToolCall.objects.filter(status=ToolCall.Status.QUEUED)
        .alias(sent=Coalesce("dispatched_at", "queued_at"))
        .filter(sent__lt=resend_before)
        .exclude(celery_task_id="")
        .only("pk", "celery_task_id")
    )
    for call in lost:
        if ToolCall.objects.filter(pk=call.pk, status=ToolCall.Status.QUEUED).update(dispatched_at=now):
            report.resent += dispatch(call.pk, call.celery_task_id)

    expired = ToolCall.objects.filter(past_deadline(now))
    for call in expired.only("pk", "attempts", "started_at"):
        if call.attempts >= MAX_ATTEMPTS:
            message = f"The worker running this call stopped before it finished ({call.attempts} attempts); it was not retried again."
            report.ended += end_call(call.pk, ToolCall.Status.FAILED, message)
            continue
        # The worker died mid-call (or could not store the result): try once more.
        task_id = str(uuid.uuid4())
        # Still past its deadline: progress stored meanwhile means its worker is alive after all.
        # Queued again with a queue deadline of its own (its old lease is past, its queued_at may be
        # long ago): the first rule above must give a worker time to take it.
        requeued = ToolCall.objects.filter(past_deadline(now), pk=call.pk, started_at=call.started_at).update(
            status=ToolCall.Status.QUEUED, dispatched_at=now, celery_task_id=task_id,
            deadline_at=now + timedelta(seconds=settings.CALL_QUEUE_DEADLINE),
        )
        if requeued:
            report.resent += dispatch(call.pk, task_id)
    # Waiting for input past its deadline: nobody answered the server's request in time.
    for call in ToolCall.objects.filter(status=ToolCall.Status.INPUT_REQUIRED, deadline_at__lt=now).only("pk"):
        message = f"Nobody answered the server's request for input within {settings.MCP_INPUT_TIMEOUT:g} s (MCP_INPUT_TIMEOUT)."
        # Only if still resting: a last-moment answer may have queued it again meanwhile.
        if end_call(call.pk, ToolCall.Status.FAILED, message, ending=(ToolCall.Status.INPUT_REQUIRED,)):
            report.ended += 1
            close_open_requests(call.pk, ServerRequest.Status.EXPIRED, message)

    if report.resent or report.ended:
        log.warning("sweep: %d tool call(s) sent again, %d ended", report.resent, report.ended)
    return report
