"""Re-running a recorded conversation's tool calls against today's servers, and the diff.

Why: a conversation recorded last week is a regression test for an MCP server. A "recorded"
replay runs every tool call the conversation made (the model's and its views'), in order, with
the recorded arguments, through the normal pipeline (`start_tool_call`, origin `replay`,
`replay_of` the original), then compares each new result with the recorded one: the full
result and the projection as structural JSON diffs (chat/jsondiff.py, volatile paths ignored),
plus status, duration, sizes and tokens.

The calls run one after another without a worker ever waiting on another task: `advance()`
starts the next call as a Celery chain `execute_tool_call -> replay_advance`, and each
`replay_advance` compares what ended and starts the next. A lost link is picked up by the
sweep (`resume_stalled_runs`) and by anyone reading the run (`resume_if_stalled`).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from chat import jsondiff
from chat.models import Conversation, ReplayItem, ReplayRun
from chat.tool_calls import caller, calls_of
from tools.runtime import stored_result
from tools.models import Server, ToolCall, ToolResult
from tools.mcp.wire_result import LARGE_BYTES

log = logging.getLogger(__name__)

# The calls a re-run repeats: what the model asked for and what the conversation's views asked for.
RECORDED_ORIGINS = (ToolCall.Origin.LLM, ToolCall.Origin.WIDGET)

# A run whose current call ended this long ago without being compared lost its link: advance it.
STALL_SECONDS = 10


class ReplayError(Exception):
    """A replay that cannot start (bad volatile path, unknown server); the message says why."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def recorded_calls(conversation: Conversation):
    """The conversation's recorded tool calls in the order they were made."""
    return (
        calls_of(conversation).filter(origin__in=RECORDED_ORIGINS)
        .select_related("full_result", "projection").defer("full_result__raw")  # sizes only: never the results
        .order_by("queued_at", "pk")
    )


def snapshot(call: ToolCall) -> dict[str, Any]:
    """What a comparison shows of a call besides its JSON: status, timing, sizes, tokens."""
    result = call.related_or_none("full_result")
    proj = call.related_or_none("projection")
    return {
        "status": call.status,
        "error": (call.error or "")[:500],
        "duration_ms": call.duration_ms,
        "size_full": result.size_bytes if result else 0,
        "tokens_full": result.tokens if result else 0,
        "size_projection": proj.size_bytes if proj else 0,
        "tokens_projection": proj.tokens if proj else 0,
        "policy": proj.policy if proj else None,
    }


def resolve_servers(user, names: list[str], recorded: dict[str, int | None], overrides: dict[str, int]) -> dict[str, int | None]:
    """Recorded server name -> the id of the server to run on today (None: no such server).

    An override (`--server NAME=ID`) wins; then the server the call used, if the user can still
    see it; then a visible server with the same name (the user's own first), which is how an
    imported conversation finds this deployment's servers.
    """
    visible = Server.objects.visible_to(user)
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ReplayError(f"The conversation used no server named {', '.join(map(repr, unknown))}; "
                          f"its servers are {', '.join(map(repr, names)) or 'none'}.")
    out: dict[str, int | None] = {}
    for name in names:
        if name in overrides:
            server_id = overrides[name]
            if not isinstance(server_id, int) or not visible.filter(pk=server_id).exists():
                raise ReplayError(f"No server with id {server_id!r} that you can use (for {name!r}).", status=404)
            out[name] = server_id
            continue
        original = recorded.get(name)
        if original and visible.filter(pk=original).exists():
            out[name] = original
            continue
        same_name = sorted(visible.filter(name=name), key=lambda s: (s.owner_id != user.pk, s.pk))
        out[name] = same_name[0].pk if same_name else None
    return out


def start_run(conversation: Conversation, user, *, ignore_paths: Any = None, servers: Any = None) -> ReplayRun:
    """Create the run and its items, and start the first call once this transaction commits."""
    try:
        ignore = jsondiff.validate_patterns(ignore_paths)
    except jsondiff.PatternError as exc:
        raise ReplayError(str(exc)) from None
    overrides = servers or {}
    if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
        raise ReplayError("`servers` must map a recorded server name to a server id: {\"basic\": 3}.")
    calls = list(recorded_calls(conversation))
    names: list[str] = []
    recorded: dict[str, int | None] = {}
    for call in calls:
        if call.server_name not in names:
            names.append(call.server_name)
        if call.server_id and call.server_name not in recorded:
            recorded[call.server_name] = call.server_id
    server_map = resolve_servers(user, names, recorded, overrides)
    with transaction.atomic():
        run = ReplayRun.objects.create(
            conversation=conversation, created_by=user, kind=ReplayRun.Kind.RECORDED, ignore_paths=ignore,
            server_map=server_map, summary={"total": len(calls)},
        )
        ReplayItem.objects.bulk_create([
            ReplayItem(run=run, position=i, original=call, server_name=call.server_name, tool_name=call.tool_name,
                       arguments=call.arguments, before=snapshot(call))
            for i, call in enumerate(calls, start=1)
        ])
        transaction.on_commit(lambda: _send_advance(run.pk))
    return run


def _send_advance(run_id: int) -> None:
    from chat.tasks import replay_advance

    try:
        replay_advance.delay(run_id)
    except Exception as exc:  # noqa: BLE001 - the sweep and readers of the run advance it later
        log.warning("could not send replay_advance for run %s (%s)", run_id, exc)


def advance(run_id: int) -> str:
    """Compare every call that ended, start the next one, or finish the run. Idempotent."""
    from celery import chain

    from chat.tasks import replay_advance
    from tools.runtime.lifecycle import start_tool_call
    from tools.runtime.tasks import execute_tool_call

    with transaction.atomic():
        run = ReplayRun.objects.select_for_update().filter(pk=run_id).select_related("created_by", "conversation").first()
        if run is None or run.status != ReplayRun.Status.RUNNING or run.kind != ReplayRun.Kind.RECORDED:
            return "not running"
        ignore = jsondiff.Ignore(run.ignore_paths)
        items = run.items.select_related("original__full_result", "original__projection", "call") \
            .defer("original__full_result__raw").order_by("position")
        for item in items:
            if item.verdict != ReplayItem.Verdict.PENDING:
                continue
            if item.call_id is None:
                server = _server_for(run, item)
                if isinstance(server, str):
                    item.verdict, item.error = ReplayItem.Verdict.ERROR, server
                    item.save(update_fields=["verdict", "error"])
                    continue
                call = start_tool_call(
                    server=server, tool_name=item.tool_name, arguments=item.arguments, origin=ToolCall.Origin.REPLAY,
                    user=run.created_by, caller=caller(run.conversation), replay_of=item.original, enqueue=False,
                    as_task=bool(item.original and item.original.task_mode == "optional"),
                )
                item.call = call
                item.save(update_fields=["call"])
                ReplayRun.objects.filter(pk=run.pk).update(updated_at=timezone.now())
                steps = chain(execute_tool_call.si(str(call.pk)).set(task_id=call.celery_task_id), replay_advance.si(run.pk))
                transaction.on_commit(steps.apply_async)
                return "started"
            call = ToolCall.objects.select_related("full_result", "projection").defer("full_result__raw").get(pk=item.call_id)
            if not call.is_final:
                return "waiting"
            compare(item, call, ignore)
        _finish(run)
    return "finished"


def _server_for(run: ReplayRun, item: ReplayItem) -> Server | str:
    """The server this item runs on today, or why there is none."""
    server_id = (run.server_map or {}).get(item.server_name)
    server = Server.objects.visible_to(run.created_by).filter(pk=server_id).first() if server_id else None
    if server is None:
        return (f"No server named “{item.server_name}” here that you can use: add one with that name, "
                f"or map it to another server (--server \"{item.server_name}=ID\").")
    if not server.enabled:
        return f"The server “{server.name}” is disabled."
    return server


def compare(item: ReplayItem, call: ToolCall, ignore: jsondiff.Ignore) -> None:
    """Store the differences between the recorded call and its re-run."""
    original = item.original
    item.after = snapshot(call)
    if original is None:
        item.verdict, item.error = ReplayItem.Verdict.ERROR, "The recorded call was deleted; nothing to compare with."
        item.save(update_fields=["after", "verdict", "error"])
        return
    old_full, new_full = original.related_or_none("full_result"), call.related_or_none("full_result")
    old_proj, new_proj = original.related_or_none("projection"), call.related_or_none("projection")
    item.full_diff = _diff_full(old_full, new_full, ignore)
    item.projection_diff = _diff_rows(old_proj.payload if old_proj else None, new_proj.payload if new_proj else None, ignore)
    changed = (
        item.before.get("status") != call.status
        or item.full_diff["total"] > 0
        or item.projection_diff["total"] > 0
    )
    item.verdict = ReplayItem.Verdict.DIFFERENT if changed else ReplayItem.Verdict.SAME
    item.save(update_fields=["after", "full_diff", "projection_diff", "verdict"])


def _diff_full(old: ToolResult | None, new: ToolResult | None, ignore: jsondiff.Ignore) -> dict[str, Any]:
    """The diff of two full results (their `raw` deferred). Under LARGE_BYTES (1 MB) both are
    parsed and diffed path by path; from there on, as the pipeline never parses such a result
    whole, the stored texts are compared by their digests (read in pieces): the same text is no
    change, another one is one change at `$` showing the start of each (ignored paths cannot
    apply). Parsed and diffed, two 40 MB results cost the worker ~20x their size."""
    if max(old.size_bytes if old else 0, new.size_bytes if new else 0) < LARGE_BYTES:
        return _diff_rows(old.raw if old else None, new.raw if new else None, ignore)
    if old is not None and new is not None and stored_result.digest(old.pk) == stored_result.digest(new.pk):
        return {"changes": [], "total": 0, "ignored": 0, "truncated": False}
    values = {name: _stored_preview(row) for name, row in (("old", old), ("new", new)) if row is not None}
    kind = "changed" if len(values) == 2 else ("added" if new is not None else "removed")
    return {"changes": [{"path": "$", "kind": kind, **values}], "total": 1, "ignored": 0, "truncated": False}


def _stored_preview(result: ToolResult) -> dict[str, Any]:
    """A change's value for a large result: its first characters as stored (jsondiff.preview's shape)."""
    text, octets = stored_result.head(result.pk, jsondiff.PREVIEW_CHARS)
    return {"$preview": text + "…", "$chars": octets}


def _diff_rows(old: Any, new: Any, ignore: jsondiff.Ignore) -> dict[str, Any]:
    """A diff of two stored values, where either may be missing (a call that failed has no full result)."""
    if old is None and new is None:
        return {"changes": [], "total": 0, "ignored": 0, "truncated": False}
    if old is None or new is None:
        kind, value = ("added", {"new": jsondiff.preview(new)}) if old is None else ("removed", {"old": jsondiff.preview(old)})
        return {"changes": [{"path": "$", "kind": kind, **value}], "total": 1, "ignored": 0, "truncated": False}
    return jsondiff.diff(old, new, ignore).as_json()


def _finish(run: ReplayRun) -> None:
    counts = {"total": 0, "same": 0, "different": 0, "error": 0}
    for verdict in run.items.values_list("verdict", flat=True):
        counts["total"] += 1
        if verdict in counts:
            counts[verdict] += 1
    if counts["error"]:
        verdict = ReplayRun.Verdict.ERROR
    elif counts["different"]:
        verdict = ReplayRun.Verdict.DIFFERENT
    else:
        verdict = ReplayRun.Verdict.SAME
    ReplayRun.objects.filter(pk=run.pk).update(
        status=ReplayRun.Status.COMPLETED, verdict=verdict, summary=counts, finished_at=timezone.now(), updated_at=timezone.now(),
    )
    run.status, run.verdict, run.summary = ReplayRun.Status.COMPLETED, verdict, counts


def resume_if_stalled(run: ReplayRun, now=None) -> bool:
    """Advance a recorded run whose current call ended but whose next step never came."""
    if run.status != ReplayRun.Status.RUNNING or run.kind != ReplayRun.Kind.RECORDED:
        return False
    now = now or timezone.now()
    if now - run.updated_at < timedelta(seconds=STALL_SECONDS):
        return False
    current = run.items.filter(verdict=ReplayItem.Verdict.PENDING).order_by("position").select_related("call").first()
    if current is not None and current.call is not None and not current.call.is_final:
        return False  # the call is running (the tools sweep ends it at its deadline)
    advance(run.pk)
    return True


def resume_stalled_runs() -> int:
    """The sweep's part: every running recorded run that stopped moving is advanced."""
    return sum(resume_if_stalled(run) for run in ReplayRun.objects.filter(status=ReplayRun.Status.RUNNING, kind=ReplayRun.Kind.RECORDED))


# --- JSON shapes ------------------------------------------------------------------------------------

def item_json(item: ReplayItem) -> dict[str, Any]:
    return {
        "position": item.position, "server_name": item.server_name, "tool": item.tool_name, "arguments": item.arguments,
        "original_id": str(item.original_id) if item.original_id else None,
        "call_id": str(item.call_id) if item.call_id else None,
        "original_result_url": f"/api/tool-calls/{item.original_id}/result/" if item.original_id else None,
        "call_result_url": f"/api/tool-calls/{item.call_id}/result/" if item.call_id else None,
        "verdict": item.verdict, "error": item.error, "before": item.before, "after": item.after,
        "full_diff": item.full_diff, "projection_diff": item.projection_diff,
    }


def run_json(run: ReplayRun, *, items: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": run.pk, "conversation_id": run.conversation_id, "kind": run.kind, "status": run.status,
        "verdict": run.verdict or None, "ignore_paths": run.ignore_paths, "server_map": run.server_map,
        "summary": run.summary, "error": run.error,
        "live_conversation_id": run.live_conversation_id, "comparison": run.comparison if items else None,
        "created_by": run.created_by.get_username() if run.created_by_id else None,
        "created_at": run.created_at.isoformat(), "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "url": f"/chat/replays/{run.pk}/", "api_url": f"/api/replays/{run.pk}/",
    }
    if items:
        data["items"] = [item_json(i) for i in run.items.order_by("position")]
    return data
