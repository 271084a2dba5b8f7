"""Load tests through the workers: N calls of one tool at concurrency C, each an ordinary stored
tool call (tools/runtime/lifecycle.py `start_tool_call`, origin "load"), grouped under a LoadRun.

The driver (`drive`) runs in a Celery task on a worker: it keeps C calls in flight, records
progress on the run row about twice a second, stops starting calls when the run is cancelled
(and cancels those in flight), and can be run again by a redelivered task: it counts what the
run already started and carries on. The figures (`figures`) are read from the stored calls: calls/s,
end-to-end time (queued → finished, what a caller waits) and the server's own wire time (the
JSON-RPC log's latency of each `tools/call` response from this server during the run: the time
between the request frame going out and its response coming in).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from typing import Any

from celery import signature
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from review.models import LoadCall, LoadRun
from tools.models import RpcFrame, Server, ToolCall

log = logging.getLogger(__name__)

POLL = 0.02  # how often the driver looks for ended calls (s)
PROGRESS_EVERY = 0.5  # how often it writes progress on the run row (s)


class BadLoadTest(ValueError):
    """Settings out of bounds, or a tool the server does not list."""


def validate(server: Server, tool_name: str, arguments: Any, calls: int, concurrency: int) -> None:
    if not isinstance(arguments, dict):
        raise BadLoadTest("Arguments must be a JSON object.")
    if not 1 <= calls <= settings.LOADTEST_MAX_CALLS:
        raise BadLoadTest(f"Calls must be from 1 to {settings.LOADTEST_MAX_CALLS} (LOADTEST_MAX_CALLS).")
    if not 1 <= concurrency <= settings.LOADTEST_MAX_CONCURRENCY:
        raise BadLoadTest(f"Concurrency must be from 1 to {settings.LOADTEST_MAX_CONCURRENCY} (LOADTEST_MAX_CONCURRENCY).")
    if not server.tools.filter(name=tool_name).exists():
        raise BadLoadTest(f"{server.name} lists no tool {tool_name!r} (refresh the server first?).")


def create(server: Server, tool_name: str, arguments: dict, calls: int, concurrency: int, user,
           compare_to: LoadRun | None = None, dispatch: bool = True) -> LoadRun:
    """Validate, store the run, and send its driver task (after commit)."""
    validate(server, tool_name, arguments, calls, concurrency)
    run = LoadRun.objects.create(server=server, tool_name=tool_name, arguments=arguments, calls=calls,
                                 concurrency=concurrency, started_by=user, compare_to=compare_to)
    if dispatch:
        # Sent by name: review/tasks.py defines the task and imports this module.
        transaction.on_commit(lambda: signature("review.tasks.run_load_test", args=(str(run.pk),)).apply_async(ignore_result=True))
    return run


def cancel(run: LoadRun) -> None:
    """Ask the driver to stop: it starts no more calls and cancels those in flight."""
    LoadRun.objects.filter(pk=run.pk, status__in=LoadRun.ACTIVE).update(cancel_requested=True)
    # A run whose driver never started (no worker) ends here.
    LoadRun.objects.filter(pk=run.pk, status=LoadRun.Status.QUEUED).update(
        status=LoadRun.Status.CANCELLED, finished_at=timezone.now())


def drive(run_id: str) -> str:
    """Run the load test to its end (the body of review.tasks.run_load_test)."""
    from tools.runtime.lifecycle import start_tool_call

    run = LoadRun.objects.select_related("server", "started_by").get(pk=run_id)
    if not run.is_active:
        return run.status
    LoadRun.objects.filter(pk=run.pk, started_at__isnull=True).update(started_at=timezone.now())
    LoadRun.objects.filter(pk=run.pk).update(status=LoadRun.Status.RUNNING)
    tool = run.server.tools.filter(name=run.tool_name).first()
    # Picked up after a redelivery: what the run already started, and which of those still run.
    started = LoadCall.objects.filter(run=run).count()
    in_flight = set(LoadCall.objects.filter(run=run).exclude(tool_call__status__in=ToolCall.FINAL)
                    .values_list("tool_call_id", flat=True))
    last_progress, cancelled = 0.0, False
    while True:
        if in_flight:
            ended = set(ToolCall.objects.filter(pk__in=in_flight, status__in=ToolCall.FINAL).values_list("pk", flat=True))
            in_flight -= ended
        now = time.monotonic()
        if now - last_progress >= PROGRESS_EVERY:
            last_progress = now
            cancelled = cancelled or LoadRun.objects.filter(pk=run.pk, cancel_requested=True).exists()
            _progress(run, started)
        if cancelled:
            break
        while started < run.calls and len(in_flight) < run.concurrency:
            call = start_tool_call(server=run.server, tool_name=run.tool_name, arguments=run.arguments,
                                   origin=ToolCall.Origin.LOAD, user=run.started_by, tool=tool)
            LoadCall.objects.create(run=run, tool_call=call, seq=started)
            in_flight.add(call.pk)
            started += 1
        if started >= run.calls and not in_flight:
            break
        time.sleep(POLL)
    if cancelled:
        from tools.runtime.lifecycle import cancel_calls

        cancel_calls(ToolCall.objects.filter(pk__in=in_flight), "The load test was cancelled.")
    _progress(run, started)
    status = LoadRun.Status.CANCELLED if cancelled else LoadRun.Status.SUCCEEDED
    time.sleep(0.3)  # the JSON-RPC log writes frames in batches: let the last responses land
    # The figures go with the final status, in one UPDATE: a reader who sees the run ended reads
    # its figures (a CI run read the status between two UPDATEs and found no figures).
    LoadRun.objects.filter(pk=run.pk).update(status=status, finished_at=timezone.now(), stats=figures(run))
    return status


def _progress(run: LoadRun, started: int) -> None:
    calls = ToolCall.objects.filter(load_call__run=run)
    done = calls.filter(status__in=ToolCall.FINAL).count()
    errors = calls.filter(status__in=ToolCall.FINAL).exclude(status=ToolCall.Status.SUCCEEDED).count()
    LoadRun.objects.filter(pk=run.pk).update(dispatched=started, done=done, errors=errors)


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100) of `values`, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return round(ordered[rank - 1], 2)


def _summary(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95), "p99": percentile(values, 99),
            "max": round(max(values), 2) if values else None,
            "mean": round(sum(values) / len(values), 2) if values else None}


def error_kind(status: str, error: str) -> str:
    """A short kind for grouping: the status, and the error's first line without numbers."""
    import re

    first = (error or "").strip().splitlines()[0] if error and error.strip() else ""
    first = re.sub(r"\d+(\.\d+)?", "N", first)[:80]
    return f"{status}: {first}" if first else status


def figures(run: LoadRun) -> dict[str, Any]:
    """The run's figures, from its stored calls and the server's JSON-RPC log."""
    rows = list(ToolCall.objects.filter(load_call__run=run).values_list("status", "error", "queued_at", "finished_at",
                                                                         "duration_ms"))
    ended = [r for r in rows if r[0] in ToolCall.FINAL and r[3] is not None]
    e2e = [(fin - queued).total_seconds() * 1000 for _, _, queued, fin, _ in ended]
    worker = [d for *_, d in ended if d is not None]
    errors = Counter(error_kind(status, error) for status, error, *_ in ended if status != ToolCall.Status.SUCCEEDED)
    first = min((q for _, _, q, _, _ in rows), default=None)
    last = max((f for *_, f, _ in ended), default=None)
    elapsed = (last - first).total_seconds() if first and last else 0.0
    wire: list[float] = []
    if first and last:
        wire = list(RpcFrame.objects.filter(server=run.server, method="tools/call", kind__in=("response", "error"),
                                            direction=RpcFrame.IN, at__gte=first, at__lte=last, latency_ms__isnull=False)
                    .values_list("latency_ms", flat=True))
    return {
        "calls": len(rows), "ended": len(ended), "errors": sum(errors.values()),
        "error_rate": round(sum(errors.values()) / len(ended), 4) if ended else 0.0,
        "elapsed_s": round(elapsed, 3), "calls_per_s": round(len(ended) / elapsed, 2) if elapsed else None,
        "end_to_end_ms": _summary(e2e), "worker_ms": _summary(worker), "wire_ms": _summary(wire),
        "errors_by_kind": dict(errors.most_common()),
    }


def live_figures(run: LoadRun) -> dict[str, Any]:
    """The stored figures of an ended run, else computed now (what the run page polls)."""
    return run.stats if (not run.is_active and run.stats) else figures(run)


def run_json(run: LoadRun) -> dict[str, Any]:
    data = {
        "id": str(run.pk), "server_id": run.server_id, "tool": run.tool_name, "arguments": run.arguments,
        "calls": run.calls, "concurrency": run.concurrency, "status": run.status, "error": run.error,
        "dispatched": run.dispatched, "done": run.done, "errors": run.errors, "cancel_requested": run.cancel_requested,
        "created_at": run.created_at, "started_at": run.started_at, "finished_at": run.finished_at,
        "figures": live_figures(run),
    }
    if run.compare_to_id:
        other = LoadRun.objects.filter(pk=run.compare_to_id).first()
        if other is not None:
            data["compare_to"] = {"id": str(other.pk), "created_at": other.created_at, "figures": live_figures(other)}
    return data
