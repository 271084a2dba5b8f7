"""A run's life: start it, move it on, grade each attempt, cancel it, pick it up after a crash.

Why this shape: every attempt is an ordinary chat conversation whose turns run on the workers
like any turn (chat.tasks.begin_turn), so it opens in the replay player and survives a worker
restart the way turns do. Nothing waits inside a worker: `advance` (a Celery task, every
POLL_SECONDS while the run runs) looks at the database, sends the next user message of a
multi-turn case, hands ended attempts to `grade_attempt` (its own task: a judge may take
seconds), starts pending attempts within the run's per-provider limit, and reschedules itself.
The run row holds a `tick`: an advance holding an older tick is a duplicate (a redelivery, or
the sweep's resend) and does nothing, so one chain moves each run. A chain that was lost (its
worker died with the countdown task) is sent again by the sweep (`resume_stalled_runs`) after
EVALS_STALL_SECONDS; an attempt whose grading was lost is graded again after EVALS_REGRADE_SECONDS.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import signature
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from chat import agent
from chat.models import Conversation, Turn
from evals import checks, cost, judge, trajectory
from evals.models import Attempt, Run, Suite
from tools.models import Server

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0


class RunError(ValueError):
    """A run that cannot start, and why (bad input: the CLI exits 3)."""


class MissingServer(RunError):
    """The runner has no server of a name the suite needs (could not run: the CLI exits 2)."""


def provider_of(model: str) -> str:
    """litellm's provider prefix (`openai/gpt-4o` -> openai); a bare name is its own provider."""
    return model.split("/", 1)[0] if "/" in model else model


def parse_models(models: Any, api_base: str = "") -> list[dict[str, str]]:
    """[{"model", "api_base"}] from a list of names (or of such objects), checked."""
    if isinstance(models, str):
        models = [m for m in models.split(",")]
    if not isinstance(models, list) or not models:
        raise RunError("Give at least one model (litellm names, e.g. openai/gpt-4o-mini).")
    out = []
    for m in models:
        entry = {"model": m, "api_base": api_base} if isinstance(m, str) else m
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str) or not entry["model"].strip():
            raise RunError(f"Not a model: {m!r}.")
        base = entry.get("api_base") or ""
        if base and not (isinstance(base, str) and base.startswith(("http://", "https://"))):
            raise RunError(f"The API base of {entry['model']} must be an http:// or https:// URL.")
        out.append({"model": entry["model"].strip(), "api_base": base})
    if len({(m["model"], m["api_base"]) for m in out}) != len(out):
        raise RunError("A model is named twice.")
    return out


def servers_for(suite: Suite, user) -> list[Server]:
    """The suite's servers as the runner may use them: the suite's own row if visible, else the
    runner's server of the same name (their own first), so a shared or imported suite runs."""
    visible = Server.objects.visible_to(user).filter(enabled=True)
    out = []
    for server in suite.servers.all():
        if visible.filter(pk=server.pk).exists():
            out.append(server)
            continue
        match = sorted(visible.filter(name=server.name), key=lambda s: (s.owner_id != user.pk, s.pk))
        if not match:
            raise MissingServer(f"You have no server named {server.name!r} to run the suite on.")
        out.append(match[0])
    return out


def start_run(suite: Suite, user, models: Any, *, repeat: int = 1, api_base: str = "", api_key: str = "",
              concurrency: int | None = None) -> Run:
    """Create the run and its attempts (case x model x repeat); the first advance goes on commit."""
    entries = parse_models(models, api_base)
    if not isinstance(repeat, int) or not 1 <= repeat <= settings.EVALS_MAX_REPEAT:
        raise RunError(f"--repeat must be between 1 and {settings.EVALS_MAX_REPEAT}.")
    limit = concurrency or settings.EVALS_CONCURRENCY_PER_PROVIDER
    if not isinstance(limit, int) or limit < 1:
        raise RunError("The concurrency must be a positive integer.")
    cases = list(suite.cases.order_by("position", "pk"))
    if not cases:
        raise RunError(f"The suite {suite.name!r} has no cases.")
    for case in cases:
        try:
            checks.parse(case.expectations)
        except checks.ExpectationError as exc:
            raise RunError(f"Case {case.name!r}: {exc}") from None
        if not case.prompts or not all(isinstance(p, str) and p.strip() for p in case.prompts):
            raise RunError(f"Case {case.name!r} has no prompt.")
    servers_for(suite, user)  # refuse now rather than fail each attempt
    with transaction.atomic():
        run = Run.objects.create(suite=suite, owner=user, model_specs=entries, repeat=repeat, api_key=api_key or "",
                                 concurrency=limit, summary={"total": len(cases) * len(entries) * repeat, "done": 0})
        Attempt.objects.bulk_create([
            Attempt(run=run, case=case, case_name=case.name, case_position=case.position, prompts=case.prompts, tools=case.tools,
                    expectations=case.expectations, threshold=case.threshold, model=m["model"], model_index=i,
                    api_base=m["api_base"], provider=provider_of(m["model"]), repeat_index=k)
            for case in cases for i, m in enumerate(entries) for k in range(repeat)
        ])
        transaction.on_commit(lambda: send_advance(run.pk, 0))
    return run


def send_advance(run_id: int, tick: int, countdown: float | None = None) -> None:
    # Sent by name: evals/tasks.py defines the tasks and imports this module.
    try:
        signature("evals.tasks.advance_run", args=(run_id, tick)).apply_async(countdown=countdown)
    except Exception as exc:  # noqa: BLE001 - the sweep sends it again
        log.warning("could not send advance for eval run %s (%s)", run_id, exc)


def send_grade(attempt_id: int) -> None:
    try:
        signature("evals.tasks.grade_attempt", args=(attempt_id,)).delay()
    except Exception as exc:  # noqa: BLE001 - advance sends it again after REGRADE_SECONDS
        log.warning("could not send grading of attempt %s (%s)", attempt_id, exc)


def advance(run_id: int, tick: int) -> str:
    """One look at the run: move each attempt on, start what the limits allow, finish when all ended."""
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("suite").filter(pk=run_id).first()
        if run is None or run.status != Run.Status.RUNNING:
            return "not running"
        if tick != run.tick:
            return "superseded"
        Run.objects.filter(pk=run.pk).update(tick=F("tick") + 1, updated_at=timezone.now())
        attempts = list(run.attempts.select_related("conversation"))
        if run.cancel_requested:
            _cancel(run, attempts)
            return "cancelled"
        now = timezone.now()
        for a in attempts:
            if a.status == Attempt.Status.RUNNING:
                _move_on(a, now)
            elif a.status == Attempt.Status.EVALUATING and now - a.updated_at > timedelta(seconds=settings.EVALS_REGRADE_SECONDS):
                Attempt.objects.filter(pk=a.pk).update(updated_at=now)
                transaction.on_commit(lambda pk=a.pk: send_grade(pk))
        _start_pending(run, attempts)
        if all(a.status in Attempt.FINAL for a in attempts):
            Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, finished_at=now, summary=summarize(run))
            return "finished"
        done = sum(a.status in Attempt.FINAL for a in attempts)
        Run.objects.filter(pk=run.pk).update(summary={**run.summary, "done": done})
        transaction.on_commit(lambda: send_advance(run.pk, tick + 1, POLL_SECONDS))
    return "waiting"


def _move_on(a: Attempt, now) -> None:
    """A running attempt: wait for its turn, send its next user message, or hand it to grading."""
    conversation = a.conversation
    if conversation is None:
        _set(a, status=Attempt.Status.ERROR, error="Its conversation was deleted.", finished_at=now)
        return
    turn = conversation.turns.order_by("-created_at", "-pk").first()
    if turn is not None and turn.status == Turn.Status.RUNNING:
        if now - turn.created_at > timedelta(seconds=settings.EVALS_TURN_TIMEOUT):
            transaction.on_commit(lambda: agent.stop_turn(turn))
            _set(a, status=Attempt.Status.ERROR, finished_at=now,
                 error=f"A turn did not end within {settings.EVALS_TURN_TIMEOUT:g} s (EVALS_TURN_TIMEOUT); it was stopped.")
        return
    if turn is not None and turn.status == Turn.Status.COMPLETED and a.turns_sent < len(a.prompts):
        from chat.tasks import begin_turn

        begin_turn(conversation, a.prompts[a.turns_sent])
        a.status, a.turns_sent = Attempt.Status.RUNNING, a.turns_sent + 1
        _set(a, turns_sent=a.turns_sent)
        return
    a.status = Attempt.Status.EVALUATING
    _set(a, status=Attempt.Status.EVALUATING)
    transaction.on_commit(lambda: send_grade(a.pk))


def _set(a: Attempt, **fields) -> None:
    for k, v in fields.items():
        setattr(a, k, v)
    Attempt.objects.filter(pk=a.pk).update(updated_at=timezone.now(), **fields)


def _start_pending(run: Run, attempts: list[Attempt]) -> None:
    """Start pending attempts in order while their provider has fewer than `run.concurrency` running."""
    running: dict[str, int] = {}
    for a in attempts:
        if a.status == Attempt.Status.RUNNING:
            running[a.provider] = running.get(a.provider, 0) + 1
    pending = [a for a in attempts if a.status == Attempt.Status.PENDING]
    if not pending:
        return
    servers = None
    for a in pending:
        if running.get(a.provider, 0) >= run.concurrency:
            continue
        if servers is None:
            try:
                servers = servers_for(run.suite, run.owner)
            except RunError as exc:  # a server went away since the start
                for p in pending:
                    _set(p, status=Attempt.Status.ERROR, error=str(exc), finished_at=timezone.now())
                return
        _start(run, a, servers)
        running[a.provider] = running.get(a.provider, 0) + 1


def _start(run: Run, a: Attempt, servers: list[Server]) -> None:
    from chat.tasks import begin_turn

    title = f"Eval #{run.pk} · {a.case_name} · {a.model} #{a.repeat_index + 1}"[:200]
    conversation = Conversation.objects.create(
        owner=run.owner, title=title, model=a.model, api_base=a.api_base, api_key=run.api_key,
        system_prompt=run.suite.system_prompt, offered_tools=a.tools,
    )
    conversation.servers.set(servers)
    begin_turn(conversation, a.prompts[0])
    _set(a, status=Attempt.Status.RUNNING, conversation=conversation, turns_sent=1, started_at=timezone.now())


def _cancel(run: Run, attempts: list[Attempt]) -> None:
    now = timezone.now()
    for a in attempts:
        if a.status in Attempt.FINAL:
            continue
        if a.status == Attempt.Status.RUNNING and a.conversation is not None:
            turn = a.conversation.active_turn()
            if turn is not None:
                transaction.on_commit(lambda t=turn: agent.stop_turn(t))
        # Conditional: a grading that just ended keeps its verdict.
        Attempt.objects.filter(pk=a.pk).exclude(status__in=Attempt.FINAL).update(
            status=Attempt.Status.CANCELLED, finished_at=now, updated_at=now)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED, finished_at=now, summary=summarize(run))


def cancel(run: Run) -> None:
    """Ask the run to stop: its next advance cancels what has not ended and stops running turns."""
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True)
    send_advance(run.pk, Run.objects.get(pk=run.pk).tick)


def grade(attempt_id: int) -> str:
    """Check an ended attempt (and ask the judge); store its verdict and figures once."""
    a = Attempt.objects.select_related("run", "run__suite", "run__owner", "conversation").filter(pk=attempt_id).first()
    if a is None or a.status != Attempt.Status.EVALUATING:
        return "not evaluating"
    fields: dict[str, Any] = {}
    if a.conversation is None:
        fields = {"status": Attempt.Status.ERROR, "error": "Its conversation was deleted."}
    else:
        seen, usage = trajectory.observe(a.conversation)
        fields = {"answer": seen.answer, "steps": seen.steps, "tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out,
                  "latency_ms": usage.latency_ms, "cost_usd": cost.cost_usd(a.model, usage.tokens_in, usage.tokens_out)}
        expect = checks.parse(a.expectations)
        results = checks.evaluate(expect, seen)
        fields["checks"] = [r.as_json() for r in results]
        if Turn.Status.FAILED in usage.turn_statuses or Turn.Status.STOPPED in usage.turn_statuses:
            fields.update(status=Attempt.Status.ERROR,
                          error="; ".join(usage.turn_errors) or "A turn did not complete.")
        else:
            verdict = judge.grade(a.run.suite, a.run.owner, expect.judge, a.prompts, seen) if expect.judge else None
            fields["judge"] = verdict
            if verdict is not None and verdict.get("error"):
                fields.update(status=Attempt.Status.ERROR, error=f"Judge: {verdict['error']}")
            else:
                ok = all(r.passed for r in results) and (verdict is None or verdict["passed"])
                fields["status"] = Attempt.Status.PASSED if ok else Attempt.Status.FAILED
    updated = Attempt.objects.filter(pk=a.pk, status=Attempt.Status.EVALUATING).update(
        finished_at=timezone.now(), updated_at=timezone.now(), **fields)
    return fields["status"] if updated else "already graded"


def summarize(run: Run) -> dict[str, Any]:
    """Per case and model: attempts, passes, pass rate against the case's threshold, tokens,
    cost and latency; and the run's verdict: pass (every case at or above its threshold), fail,
    or error (an attempt could not run, or the run was cancelled)."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    counts: dict[str, int] = {}
    attempts = list(Attempt.objects.filter(run=run).order_by("case_position", "pk"))
    for a in attempts:
        counts[a.status] = counts.get(a.status, 0) + 1
        c = cells.setdefault((a.case_name, a.model), {
            "case": a.case_name, "model": a.model, "threshold": a.threshold, "attempts": 0, "passed": 0, "errors": 0,
            "tokens_in": 0, "tokens_out": 0, "cost_usd": None, "latency_ms": [], "position": a.case_position})
        c["attempts"] += 1
        c["passed"] += a.status == Attempt.Status.PASSED
        c["errors"] += a.status in (Attempt.Status.ERROR, Attempt.Status.CANCELLED)
        c["tokens_in"] += a.tokens_in
        c["tokens_out"] += a.tokens_out
        if a.cost_usd is not None:
            c["cost_usd"] = (c["cost_usd"] or 0) + a.cost_usd
        if a.latency_ms is not None:
            c["latency_ms"].append(a.latency_ms)
    rows = []
    for c in cells.values():
        lat = c.pop("latency_ms")
        c["latency_ms"] = sum(lat) / len(lat) if lat else None
        c["pass_rate"] = c["passed"] / c["attempts"] if c["attempts"] else 0.0
        c["ok"] = c["pass_rate"] >= c["threshold"] - 1e-9
        rows.append(c)
    total = len(attempts)
    done = sum(counts.get(s, 0) for s in Attempt.FINAL)
    if run.status in (Run.Status.CANCELLED, Run.Status.FAILED) or counts.get(Attempt.Status.ERROR) or counts.get(Attempt.Status.CANCELLED):
        verdict = "error"
    elif done < total:
        verdict = ""
    else:
        verdict = "pass" if all(r["ok"] for r in rows) else "fail"
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    return {"total": total, "done": done, "counts": counts, "cells": rows, "verdict": verdict,
            "below_threshold": sum(not r["ok"] for r in rows),
            "tokens_in": sum(r["tokens_in"] for r in rows), "tokens_out": sum(r["tokens_out"] for r in rows),
            "cost_usd": sum(costs) if costs else None}


def resume_stalled_runs() -> int:
    """The sweep's part: a running run whose chain has not moved for STALL_SECONDS is sent again."""
    quiet = timezone.now() - timedelta(seconds=settings.EVALS_STALL_SECONDS)
    runs = list(Run.objects.filter(status=Run.Status.RUNNING, updated_at__lt=quiet).values_list("pk", "tick"))
    for pk, tick in runs:
        send_advance(pk, tick)
    return len(runs)


def resume_if_stalled(run: Run) -> None:
    """For the CLI and pages that watch a run: nudge a run whose chain was lost."""
    if run.status == Run.Status.RUNNING and timezone.now() - run.updated_at > timedelta(seconds=settings.EVALS_STALL_SECONDS):
        send_advance(run.pk, run.tick)


def attempt_json(a: Attempt) -> dict[str, Any]:
    return {
        "id": a.pk, "case": a.case_name, "model": a.model, "repeat": a.repeat_index + 1, "status": a.status,
        "conversation_id": a.conversation_id, "checks": a.checks, "judge": a.judge, "answer": a.answer[:2000],
        "steps": a.steps, "tokens_in": a.tokens_in, "tokens_out": a.tokens_out, "cost_usd": a.cost_usd,
        "latency_ms": a.latency_ms, "error": a.error,
        "started_at": a.started_at.isoformat() if a.started_at else None,
        "finished_at": a.finished_at.isoformat() if a.finished_at else None,
    }


def run_json(run: Run) -> dict[str, Any]:
    """The run as the API, the page's progress and the CLI's --json show it (never a key)."""
    return {
        "id": run.pk, "suite_id": run.suite_id, "suite": run.suite.name, "status": run.status,
        "models": run.model_specs, "repeat": run.repeat, "concurrency": run.concurrency,
        "cancel_requested": run.cancel_requested, "error": run.error, "summary": summarize(run),
        "attempts": [attempt_json(a) for a in run.attempts.all()],
        "created_at": run.created_at.isoformat(), "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
