"""Live events: their type names, the Channels groups they go to, and THE JSON shape of a tool call.

Why one module: a finished call used to have three shapes (the live event, the API, the
`tool_call.created` event) and group names were spelled by hand in five places. Now every
tool-call event, the `/ws/tool-calls/{id}/` catch-up and every API answer use
`tool_call_json`, and every group name comes from a function here.

A tool-call event carries ids, status, sizes and tokens, timings, schema validity, `has_view`
and a bounded summary of what the model saw. `tool_call.result` also carries the full result
itself (`result`: the stored CallToolResult JSON, as its text) when it is at most
WS_INLINE_RESULT_MAX_BYTES, as it nearly always is: the page and the App view get it from the
push. A bigger one stays at `GET /api/tool-calls/{id}/result/` (the summary's `result_url`),
streamed over HTTP: a result can be any size, and daphne closes a WebSocket at 1 MiB.

Dependencies run chat -> tools -> inspector: this module never imports chat, nor names its events.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet, TextField
from django.db.models.functions import Cast, Length, Substr

from inspector import pg_nul
from inspector.events import JSON_TEXT, publish_many
from tools import callers
from tools.models import Projection, ToolCall, ToolResult, embedded_ui_resource
from tools.runtime import stored_result, waits
from tools.runtime.deadlines import call_timeout, max_timeout
from tools.runtime.projection import APP_POLICY

# --- event type names ---------------------------------------------------------------------------

# Tool-call events: on /ws/tool-calls/{id}/ and in the groups of the call's caller (a
# conversation's socket: chat/events.py names that one and its own events).
TOOL_CALL_CREATED = "tool_call.created"
TOOL_CALL_STATUS = "tool_call.status"
TOOL_CALL_RESULT = "tool_call.result"
TOOL_CALL_PROGRESS = "tool_call.progress"  # the server's notifications/progress, throttled (tools/runtime/live_calls.py)
TOOL_CALL_LOG = "tool_call.log"  # a notifications/message that arrived during the call
# What a server asks of the client during a call (tools/runtime/server_requests/).
SERVER_REQUEST_CREATED = "server_request.created"
SERVER_REQUEST_UPDATED = "server_request.updated"
# /ws/rpc-log/
RPC_FRAMES = "rpc.frames"
# /ws/servers/{id}/: what a server sends outside any one call.
RESOURCE_UPDATED = "resource.updated"  # a notifications/resources/updated of a subscribed resource
SERVER_LOG = "server.log"  # every notifications/message of the server, in a call or between calls

# --- groups ---------------------------------------------------------------------------------------

RPC_LOG_GROUP = "rpclog"


def tool_call_group(tool_call_id) -> str:
    """Status and result of one tool call (the tool page's Run, scripts)."""
    return f"toolcall.{tool_call_id}"


def server_group(server_id: int) -> str:
    """A server's own events (its resource pages and log panel)."""
    return f"server.{server_id}"


def tool_call_groups(call: ToolCall) -> list[str]:
    """The call's own group and those its caller asked for (tools/callers.py)."""
    return [tool_call_group(call.pk), *callers.groups(call.context)]


# --- the one JSON shape of a tool call --------------------------------------------------------------

# How long a call's end waits for a script that asked to wait for it (it is already waiting, or about to).
ENDED_TTL = 60

# Summaries (events, the conversation API) carry at most this much of a long text: the start of
# what the model saw, an error, a schema error. The detail (`GET /api/tool-calls/{id}/`) has all.
SUMMARY_TEXT_CHARS = 2000

# The policies whose projection records every `ui://` view it replaced (tools/runtime/projection.py notes
# each in `removed` with a reason starting "interactive view "): for them `has_view` needs no
# full result.
_RECORDING_POLICIES = {APP_POLICY, "content-first", "strict"}
_VIEW_NOTE = "interactive view "


def summary_queryset(queryset: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """`queryset` loading what `tool_call_json` needs and nothing that grows with the result.

    The full result (`raw`) and the projection payload are never read; the long texts only
    up to SUMMARY_TEXT_CHARS, cut by the database.
    """
    n = SUMMARY_TEXT_CHARS
    return (
        queryset.select_related("full_result", "projection")
        .defer("full_result__raw", "full_result__schema_error", "projection__payload", "projection__text",
               "projection__removed", "error")
        .annotate(
            summary_projection_text=Substr("projection__text", 1, n), summary_projection_chars=Length("projection__text"),
            summary_schema_error=Substr("full_result__schema_error", 1, n), summary_error=Substr("error", 1, n),
            summary_view_replaced=Exists(
                Projection.objects.filter(pk=OuterRef("pk"))
                .annotate(removed_text=Cast("removed", TextField())).filter(removed_text__contains=_VIEW_NOTE)
            ),
        )
    )


def _related(call: ToolCall, name: str):
    try:
        return getattr(call, name)
    except (ToolResult.DoesNotExist, Projection.DoesNotExist):
        return None


def _has_view(call: ToolCall, result: ToolResult | None, proj: Projection | None) -> bool:
    """An App tool, or a result carrying an MCP-UI `ui://` resource (rendered in the page)."""
    if call.is_app:
        return True
    if result is None:
        return False
    if proj is not None and proj.policy in _RECORDING_POLICIES:
        if hasattr(call, "summary_view_replaced"):
            return call.summary_view_replaced
        return any(isinstance(r, dict) and str(r.get("reason", "")).startswith(_VIEW_NOTE) for r in proj.removed or [])
    # forward-all, a cancelled call or a failed projection kept no such record: look at the result.
    if "raw" in result.get_deferred_fields():  # read in pieces, parsed only if it names a ui:// resource
        return stored_result.embedded_view(result.pk) is not None
    return embedded_ui_resource(result.raw) is not None


def _cut(text: str | None, limit: int | None) -> str:
    text = text or ""
    return text if limit is None else text[:limit]


def tool_call_json(call: ToolCall, *, detail: bool = False, full: bool = False) -> dict[str, Any]:
    """The one JSON shape of a tool call, for every event and every API answer.

    A summary (default) is bounded whatever the result's size. `detail` adds the complete
    projection (text, payload, what was removed) and error texts; `full` adds the full result
    itself (`full`: the stored CallToolResult), for `GET /api/tool-calls/{id}/` only.
    """
    result = call.related_or_none("full_result")
    proj = call.related_or_none("projection")
    limit = None if detail else SUMMARY_TEXT_CHARS
    error = getattr(call, "summary_error", None) if not detail and hasattr(call, "summary_error") else call.error
    data: dict[str, Any] = {
        "id": str(call.pk),
        "server_id": call.server_id,
        "server_name": call.server_name,
        "tool": call.tool_name,
        "origin": call.origin,
        "status": call.status,
        "error": _cut(error, limit),
        "arguments": call.arguments,
        "is_app": call.is_app,
        "has_view": _has_view(call, result, proj),
        **callers.refs_json(call),  # the caller's ids (a conversation's: conversation_id, turn_id)
        "llm_tool_call_id": call.llm_tool_call_id,
        "trace_id": call.trace_id,  # W3C trace id of the action that started it (inspector/tracing.py)
        "replay_of": str(call.replay_of_id) if call.replay_of_id else None,
        "view_call_id": str(call.view_call_id) if call.view_call_id else None,
        "queued_at": call.queued_at.isoformat(),
        "started_at": call.started_at.isoformat() if call.started_at else None,
        "finished_at": call.finished_at.isoformat() if call.finished_at else None,
        "duration_ms": call.duration_ms,
        # The call's timeout (progress extends it, up to max_timeout_s) and the current deadline.
        "timeout_s": call_timeout(call),
        "max_timeout_s": max_timeout(),
        "deadline_at": call.deadline_at.isoformat() if call.deadline_at else None,
        "progress": call.progress,
        # Sent as an MCP task (tools/runtime/task_calls.py): its id and latest status; `detail` adds every status.
        "task": _task_json(call, detail),
        # The full result: its size here, the value itself at result_url.
        "has_result": result is not None,
        "result_url": f"/api/tool-calls/{call.pk}/result/" if result is not None else None,
        "size_full": result.size_bytes if result else 0,
        "tokens_full": result.tokens if result else 0,
        "schema_valid": result.schema_valid if result else None,
        "schema_error": "",
        # What the model saw.
        "size_projection": proj.size_bytes if proj else 0,
        "tokens_projection": proj.tokens if proj else 0,
        "policy": proj.policy if proj else None,
        "projection": None,
    }
    if result is not None:
        schema_error = call.summary_schema_error if not detail and hasattr(call, "summary_schema_error") else result.schema_error
        data["schema_error"] = _cut(schema_error, limit)
    if proj is not None:
        if not detail and hasattr(call, "summary_projection_text"):
            text, chars = call.summary_projection_text or "", call.summary_projection_chars or 0
        else:
            chars = len(proj.text)
            text = _cut(proj.text, limit)
        data["projection"] = {
            "policy": proj.policy, "tokens": proj.tokens, "size_bytes": proj.size_bytes, "truncated": proj.truncated,
            "text": text, "text_complete": len(text) >= chars,
        }
        if detail:
            data["projection"].update(payload=proj.payload, removed=proj.removed)
    if full:
        data["full"] = result.raw if result else None
    return data


# --- publishing -------------------------------------------------------------------------------------

def pushes_result(size_bytes: int) -> bool:
    """Whether a full result of this stored size travels inside its `tool_call.result` event."""
    return size_bytes <= settings.WS_INLINE_RESULT_MAX_BYTES


def tool_call_event(event_type: str, call: ToolCall, result_text: str | None = None) -> dict[str, Any]:
    """A tool-call event: `{"type", "tool_call_id", "tool_call": <summary>}`, and with
    `result_text` (the full result's stored JSON text) the member `result`, written into the
    frame as that text (inspector/events.py `JSON_TEXT`)."""
    event = {"type": event_type, "tool_call_id": str(call.pk), "tool_call": tool_call_json(call)}
    if result_text is not None:
        event[JSON_TEXT] = {"result": result_text}
    return event


def stored_text_to_push(call: ToolCall) -> str | None:
    """The full result's stored JSON text if the call has one small enough to push, else None.

    The size column decides before anything is read: a big result is never loaded here. One
    query reads the small one (a JSON column cast to text: PostgreSQL's jsonb text, SQLite's
    stored text or BLOB)."""
    result = call.related_or_none("full_result")
    if result is None or not pushes_result(result.size_bytes):
        return None
    return ToolResult.objects.filter(pk=call.pk).annotate(text=Cast("raw", TextField())) \
        .values_list("text", flat=True).first()


def pushed_text(serialised: Any, size_bytes: int) -> str | None:
    """What the worker pushes of the text it just serialised and stored (str, or the wire's
    bytes for a result read lean): the same text, as the database has it, if small enough."""
    if not pushes_result(size_bytes):
        return None
    text = serialised if isinstance(serialised, str) else bytes(memoryview(serialised)).decode()
    # PostgreSQL stored U+0000 escapes as U+FFFD (inspector/pg_nul.py): push the value result_url serves.
    return pg_nul.json_text(text) if connection.vendor == "postgresql" else text


def _task_json(call: ToolCall, detail: bool) -> dict[str, Any] | None:
    if not call.task_mode:
        return None
    history = call.task_history or []
    data = {"mode": call.task_mode, "id": call.task_id, "status": call.task_status,
            "message": history[-1].get("message", "") if history else ""}
    if detail:
        data["history"] = history
    return data


def publish_tool_call(event_type: str, tool_call_id) -> None:
    """Send the call's current summary, as `event_type`, to its own group and its caller's."""
    call = summary_queryset(ToolCall.objects.filter(pk=tool_call_id)).first()
    if call is None:  # deleted meanwhile (its conversation was): nobody is left to tell
        return
    publish_loaded_tool_call(event_type, call)


def publish_loaded_tool_call(event_type: str, call: ToolCall, result_text: str | None = None) -> None:
    """The same for a call whose result rows are in hand (the pipeline just wrote them), with
    the full result's text to push if there is one (`tool_call_event`)."""
    event = tool_call_event(event_type, call, result_text)
    told = None
    if call.status in ToolCall.FINAL:
        # For a script waiting on the call (`?wait=`): a list, so an end told before it waits is not
        # lost. Pushed from the publisher loop right after the event: one hop, not a second round trip.
        key, status = waits.ended_key(call.pk), call.status

        async def told() -> None:
            await waits.apush(key, {"status": status}, ttl=ENDED_TTL)

    publish_many(tool_call_groups(call), event, then=told)

