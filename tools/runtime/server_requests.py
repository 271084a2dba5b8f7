"""What a server asks of this client during a call: elicitation, sampling, roots — one mechanism.

Every request becomes a `ServerRequest` row. On a legacy connection the request arrives inside
a live `tools/call` on the worker's pooled connection (`handle`, awaited on the pool's loop):
the row is stored, a small `server_request.created` event goes to the call's and its caller's (a conversation's)
groups, and the worker waits on Redis (tools/runtime/waits.py) for the answer, never longer than the
call's remaining time. The browser answers through the API (`answer`), which stores the answer
and pushes it to Redis. A timeout or a closed page ends an elicitation with `cancel` and a
sampling with a clear error, so no worker ever hangs. `roots/list` is answered at once from the
server's configured roots (and stored like the rest).

What is refused before anyone sees it (stored as `refused`, the server told why): an
elicitation whose schema is not a flat object of primitive properties, a URL-mode elicitation
to anything but an http(s) URL, a sampling request with more text than SAMPLING_MAX_CHARS, and
a request that cannot be tied to one tool call.

The 2026-07-28 multi round-trip input (a call that rests as `input_required`, no worker
waiting) reuses the rows (`protocol`, `round`, `input_key`), the checks, the JSON shape and
`answer`; tools/runtime/input_rounds.py stores its rounds and queues the retry once they are answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from inspector.errors import Conflict, Invalid
from inspector.events import publish
from tools import callers, signals
from tools.mcp.elicitation import answer_problems, describe_problems, with_defaults
from tools.mcp.errors import RemoteError
from tools.models import LogLevel, Server, ServerLogMessage, ServerRequest, ToolCall, parse_pool_key
from tools.runtime import events, waits
from tools.runtime.live_calls import LiveCall

log = logging.getLogger(__name__)

KINDS = {
    "elicitation/create": ServerRequest.Kind.ELICITATION,
    "sampling/createMessage": ServerRequest.Kind.SAMPLING,
    "roots/list": ServerRequest.Kind.ROOTS,
}
INVALID_PARAMS = -32602
USER_REJECTED = -1  # the spec's example code for a sampling request the user rejected
PRIMITIVES = {"string", "number", "integer", "boolean"}
SUMMARY_CHARS = 2000
ANSWER_MARGIN = 1.0  # seconds kept back from the call's deadline to send the answer


# --- checks (pure) ----------------------------------------------------------------------------------

def form_schema_problem(schema: Any) -> str:
    """Why an elicitation's requestedSchema is not allowed ('' when it is).

    The spec allows only a flat object whose properties are primitives (string, number,
    integer, boolean; strings may be enums or formats) and multi-select enums (an array of
    string enum items).
    """
    if not isinstance(schema, dict):
        return f"The requested schema must be a JSON object, not {type(schema).__name__}."
    if schema.get("type") != "object":
        return f"The requested schema must be an object schema (type \"object\"), not type {json.dumps(schema.get('type'))}."
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        return "The requested schema's properties must be a JSON object."
    if len(props) > 100:
        return f"The requested schema has {len(props)} properties; at most 100 are shown."
    for name, prop in props.items():
        if not isinstance(prop, dict):
            return f"Property “{name}” is not a schema object."
        kind = prop.get("type")
        if kind == "array" and _is_string_enum(prop.get("items")):
            continue
        if kind not in PRIMITIVES:
            return (f"Property “{name}” has type {json.dumps(kind)}: only string, number, integer and boolean "
                    "properties (and arrays of string choices) are allowed; nested objects and arrays are not.")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "The requested schema's required must be a list of property names."
    return ""


def _is_string_enum(items: Any) -> bool:
    if not isinstance(items, dict):
        return False
    if isinstance(items.get("enum"), list):
        return all(isinstance(v, str) for v in items["enum"])
    options = items.get("anyOf") or items.get("oneOf")
    return isinstance(options, list) and all(isinstance(o, dict) and isinstance(o.get("const"), str) for o in options)


def url_problem(url: Any) -> str:
    """Why a URL-mode elicitation's URL must not be shown as a link ('' when it may)."""
    if not isinstance(url, str) or not url.strip():
        return "The URL-mode elicitation has no URL."
    if len(url) > 4096:
        return f"The URL is {len(url)} characters long; at most 4096 are allowed."
    if any(ord(c) < 33 or c == "\x7f" for c in url):
        return "The URL contains spaces or control characters."
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        return f"Only http and https URLs can be opened, not “{parts.scheme or url[:20]}:”."
    if not parts.hostname:
        return "The URL has no host."
    return ""


def sampling_text_chars(params: dict[str, Any]) -> int:
    """Characters of text a sampling request asks the model to read."""
    total = len(params.get("systemPrompt") or "") if isinstance(params.get("systemPrompt"), str) else 0
    for message in params.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                total += len(block["text"])
    return total


def refusal(kind: str, params: dict[str, Any]) -> str:
    """Why a request is refused before anyone sees it ('' when it may be shown)."""
    if kind == ServerRequest.Kind.ELICITATION:
        if params.get("mode", "form") not in ("form", "url"):
            return f"Unknown elicitation mode {str(params.get('mode'))[:20]!r}: only form and url exist."
        if params.get("mode") == "url":
            return url_problem(params.get("url"))
        return form_schema_problem(params.get("requestedSchema"))
    if kind == ServerRequest.Kind.SAMPLING:
        if not isinstance(params.get("messages"), list) or not params["messages"]:
            return "The sampling request has no messages."
        chars = sampling_text_chars(params)
        if chars > settings.SAMPLING_MAX_CHARS:
            return (f"The sampling request carries {chars:,} characters of text; the inspector accepts at most "
                    f"{settings.SAMPLING_MAX_CHARS:,} (SAMPLING_MAX_CHARS).")
    return ""


def message_of(params: dict[str, Any]) -> str:
    message = params.get("message")
    return message if isinstance(message, str) else ""


# --- the one JSON shape -------------------------------------------------------------------------------

def server_request_json(row: ServerRequest, *, detail: bool = False) -> dict[str, Any]:
    """A server request for events and the API. The summary is small (no params, texts cut);
    the detail has the params as the server sent them, the user's answer and what went back."""
    params = row.params or {}
    data: dict[str, Any] = {
        "id": str(row.pk),
        "tool_call_id": str(row.tool_call_id) if row.tool_call_id else None,
        "server_id": row.server_id,
        "kind": row.kind,
        "method": row.method,
        "mode": row.mode,
        "protocol": row.protocol,
        "status": row.status,
        "action": row.action,
        "error": row.error if detail else row.error[:SUMMARY_CHARS],
        "message": message_of(params) if detail else message_of(params)[:SUMMARY_CHARS],
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        "answered_at": row.answered_at.isoformat() if row.answered_at else None,
    }
    if row.kind == ServerRequest.Kind.ELICITATION and row.mode == "url" and not url_problem(params.get("url")):
        data["url"] = params["url"]
    if detail:
        data.update(params=params, answer=row.answer, response=row.response)
    return data


def publish_request(row: ServerRequest, event_type: str, groups: list[str] | None = None) -> None:
    """`server_request.created`/`.updated` to the call's group and its caller's (`groups`, else looked up)."""
    if row.tool_call_id is None:
        return
    event = {"type": event_type, "server_request_id": str(row.pk), "tool_call_id": str(row.tool_call_id),
             "server_request": server_request_json(row)}
    publish(events.tool_call_group(row.tool_call_id), event)
    if groups is None:
        groups = callers.groups(ToolCall.objects.filter(pk=row.tool_call_id).values_list("context", flat=True).first())
    for group in groups:
        publish(group, event)


# --- worker side: the pool's hook ------------------------------------------------------------------

async def _db(fn, *args):
    """Run ORM work off the pool's loop (it must never block), with fresh DB connections."""
    def run():
        close_old_connections()
        try:
            return fn(*args)
        finally:
            close_old_connections()

    return await asyncio.to_thread(run)


async def handle(config, method: str, params: dict[str, Any], tag: Any) -> dict[str, Any]:
    """The pool's `on_server_request`: store, show, wait, answer (see the module docstring)."""
    server_id = parse_pool_key(config.key)[0]
    live = tag if isinstance(tag, LiveCall) else None
    if method == "notifications/message":
        # The SDK hands each notification to its own task, and threads finish in any order: one
        # lock per server (taken before the first await, in arrival order) stores them in order.
        async with _log_locks.setdefault(server_id, asyncio.Lock()):
            await _db(store_log, server_id, live, params)
        return {}
    kind = KINDS[method]
    if kind == ServerRequest.Kind.ROOTS:
        roots = await _db(_answer_roots, server_id, live, params)
        return {"roots": roots}
    problem = refusal(kind, params)
    if not problem and live is None:
        problem = ("The inspector cannot tell which tool call this request belongs to (it came outside a "
                   "tool call, or while several calls were running on this connection), so nobody can answer it.")
    if problem:
        await _db(_create, server_id, live, method, kind, params, ServerRequest.Status.REFUSED, problem)
        raise RemoteError(INVALID_PARAMS, f"The inspector refused this request: {problem}")
    row = await _db(_create, server_id, live, method, kind, params, ServerRequest.Status.PENDING, "")
    live.open_requests.add(str(row.pk))
    try:
        message = await waits.wait(waits.answer_key(row.pk), live.remaining() - ANSWER_MARGIN)
    finally:
        live.open_requests.discard(str(row.pk))
    if message is None or "ended" in message:
        reason = (message or {}).get("ended") or "The call's time ran out before anyone answered."
        stored = await _db(_expire, row.pk, reason, message is None, live)
        if stored is None:
            if kind == ServerRequest.Kind.ELICITATION:
                return {"action": "cancel"}
            raise RemoteError(USER_REJECTED, f"The sampling request was not answered: {reason}")
        message = stored  # answered at the very last moment: that answer stands
    if "error" in message:
        error = message["error"]
        raise RemoteError(error.get("code", USER_REJECTED), error.get("message", "Refused."), error.get("data"))
    return message["result"]


def _create(server_id: int, live, method: str, kind: str, params: dict, status: str, error: str) -> ServerRequest:
    now = timezone.now()
    row = ServerRequest.objects.create(
        tool_call_id=live.tool_call_id if live else None, server_id=server_id, kind=kind, method=method,
        mode=(params.get("mode") or "form") if kind == ServerRequest.Kind.ELICITATION else "",
        params=params, status=status, error=error,
        response={"error": {"code": INVALID_PARAMS, "message": error}} if error else None,
        expires_at=live.deadline_at if live else None, answered_at=now if status != ServerRequest.Status.PENDING else None,
    )
    publish_request(row, events.SERVER_REQUEST_CREATED, live.caller_groups if live else None)
    return row


def _answer_roots(server_id: int, live, params: dict) -> list[dict[str, Any]]:
    roots = Server.objects.filter(pk=server_id).values_list("roots", flat=True).first() or []
    ServerRequest.objects.create(
        tool_call_id=live.tool_call_id if live else None, server_id=server_id, kind=ServerRequest.Kind.ROOTS,
        method="roots/list", params=params, status=ServerRequest.Status.ANSWERED, response={"result": {"roots": roots}},
        answered_at=timezone.now(),
    )
    return roots


def _expire(pk, reason: str, timed_out: bool, live) -> dict | None:
    """End an unanswered request (`cancel` for an elicitation, an error for a sampling); if an
    answer won the race, return it instead."""
    kind = ServerRequest.objects.filter(pk=pk).values_list("kind", flat=True).first()
    elicitation = kind == ServerRequest.Kind.ELICITATION
    ended = ServerRequest.objects.filter(pk=pk, status__in=ServerRequest.OPEN).update(
        status=ServerRequest.Status.EXPIRED if timed_out else ServerRequest.Status.CANCELLED,
        error=reason, answered_at=timezone.now(), action="cancel" if elicitation else "",
        response={"result": {"action": "cancel"}} if elicitation else {"error": {"code": USER_REJECTED, "message": reason}},
    )
    row = ServerRequest.objects.get(pk=pk)
    if not ended:
        return row.response
    publish_request(row, events.SERVER_REQUEST_UPDATED, live.caller_groups if live else None)
    return None


LOG_TEXT_CHARS = 500
_log_locks: dict[int, asyncio.Lock] = {}  # used on the pool's event loop only


def store_log(server_id: int, live, params: dict[str, Any]) -> None:
    level = params.get("level") if params.get("level") in LogLevel.values else LogLevel.INFO
    row = ServerLogMessage.objects.create(
        server_id=server_id, tool_call_id=live.tool_call_id if live else None, level=level,
        logger=str(params.get("logger") or "")[:200], data=params.get("data"),
    )
    # The server's log panel (tools/server_log.py) shows every message, in a call or between calls.
    publish(events.server_group(server_id), {"type": events.SERVER_LOG, "server_id": server_id, "log": log_json(row)})
    if live is None:
        return
    event = {"type": events.TOOL_CALL_LOG, "tool_call_id": live.tool_call_id, "log": log_json(row)}
    for group in live.groups():
        publish(group, event)


def log_json(row: ServerLogMessage) -> dict[str, Any]:
    data = row.data
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return {"id": row.pk, "level": row.level, "logger": row.logger, "text": text[:LOG_TEXT_CHARS],
            "complete": len(text) <= LOG_TEXT_CHARS, "at": row.at.isoformat(),
            "tool_call_id": str(row.tool_call_id) if row.tool_call_id else None}


# --- web side: the browser's answer -----------------------------------------------------------------

def _end(row: ServerRequest, user, *, status: str, from_statuses, action: str = "", answer=None, response=None,
         error: str = "") -> ServerRequest:
    """Move the row to its answer (conditionally: the worker may have given up meanwhile) and
    hand the answer to the waiting worker."""
    with transaction.atomic():
        updated = ServerRequest.objects.filter(pk=row.pk, status__in=from_statuses).update(
            status=status, action=action, answer=answer if answer is not None else row.answer, response=response,
            error=error, answered_by=user, answered_at=timezone.now(),
        )
    if not updated:
        current = ServerRequest.objects.filter(pk=row.pk).values_list("status", flat=True).first()
        raise Conflict(f"This request has already ended ({current}).", status_now=current)
    row.refresh_from_db()
    if response is not None and row.protocol == ServerRequest.Protocol.LEGACY:
        waits.push(waits.answer_key(row.pk), response)
    publish_request(row, events.SERVER_REQUEST_UPDATED)
    return row


def answer(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    """Apply the browser's answer to `row` (already checked to be the user's to answer)."""
    action = body.get("action")
    if row.kind == ServerRequest.Kind.ELICITATION:
        return _answer_elicitation(row, user, action, body)
    if row.kind == ServerRequest.Kind.SAMPLING:
        return _answer_sampling(row, user, action, body)
    raise Conflict("This request is answered by the inspector itself.")


def _answer_elicitation(row: ServerRequest, user, action: Any, body: dict[str, Any]) -> ServerRequest:
    if action not in ("accept", "decline", "cancel"):
        raise Invalid("`action` must be accept, decline or cancel.")
    result: dict[str, Any] = {"action": action}
    if action == "accept" and row.mode != "url":
        content = body.get("content")
        if not isinstance(content, dict):
            raise Invalid("`content` must be a JSON object of the requested fields.")
        schema = dict(row.params.get("requestedSchema") or {})
        content = with_defaults(schema, content)  # SEP-1034: omitted fields take the schema's defaults
        try:
            problems = answer_problems(schema, content)
        except jsonschema.SchemaError as exc:
            raise Invalid(f"The server's schema is invalid: {exc.message}") from None
        if problems:  # each shown beside its field; the message names fields by their titles
            raise Invalid(describe_problems(schema, problems), fields=problems)
        result["content"] = content
    return _end(row, user, status=ServerRequest.Status.ANSWERED, from_statuses=[ServerRequest.Status.PENDING],
                action=action, answer=result, response={"result": result})


def _answer_sampling(row: ServerRequest, user, action: Any, body: dict[str, Any]) -> ServerRequest:
    if action in ("reject", "cancel"):
        why = "The user rejected the sampling request." if action == "reject" else "The user closed the page without answering."
        return _end(row, user, status=ServerRequest.Status.REFUSED, from_statuses=ServerRequest.OPEN, action=action,
                    response={"error": {"code": USER_REJECTED, "message": why}}, error=why)
    if action == "approve":
        return _approve_sampling(row, user, body)
    if action == "by_hand":
        return _answer_sampling_by_hand(row, user, body)
    if action == "send":
        result = (row.answer or {}).get("result")
        if row.status != ServerRequest.Status.GENERATED or not result:
            raise Conflict("There is no generated answer to send yet.", status_now=row.status)
        text = body.get("text")
        if isinstance(text, str):  # the user edited the answer before returning it
            result = {**result, "content": {"type": "text", "text": text}}
        return _end(row, user, status=ServerRequest.Status.ANSWERED, from_statuses=[ServerRequest.Status.GENERATED],
                    action="send", answer={**row.answer, "result": result}, response={"result": result})
    raise Invalid("`action` must be approve, by_hand, send, reject or cancel.")


def _answer_sampling_by_hand(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    """A person types the model's part: the CreateMessageResult goes back as they wrote it, no
    model involved (for a server author with no model at hand, as in the official inspector)."""
    role, text = body.get("role", "assistant"), body.get("text")
    model, stop = body.get("model"), body.get("stopReason", "endTurn")
    if role not in ("user", "assistant"):
        raise Invalid("`role` must be assistant or user.")
    if not isinstance(text, str) or not text.strip():
        raise Invalid("Type the answer's text: an empty answer is not sent.")
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise Invalid("Name the model the answer is from (any name, at most 200 characters), e.g. human.")
    if not isinstance(stop, str) or len(stop) > 100:
        raise Invalid("`stopReason` must be text (endTurn, stopSequence, maxTokens or another reason).")
    result: dict[str, Any] = {"role": role, "content": {"type": "text", "text": text}, "model": model.strip()}
    if stop.strip():
        result["stopReason"] = stop.strip()
    return _end(row, user, status=ServerRequest.Status.ANSWERED, from_statuses=[ServerRequest.Status.PENDING],
                action="by_hand", answer={"by_hand": True, "result": result}, response={"result": result})


def _approve_sampling(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
        isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("text"), str) for m in messages
    ):
        raise Invalid("`messages` must be a non-empty list of {role: user|assistant, text}.")
    chars = sum(len(m["text"]) for m in messages)
    if chars > settings.SAMPLING_MAX_CHARS:
        raise Invalid(f"The messages carry {chars:,} characters; at most {settings.SAMPLING_MAX_CHARS:,} are sent to a model.")
    caller_model = callers.model(row.tool_call) if row.tool_call_id else ""
    model = (body.get("model") or "").strip() if isinstance(body.get("model"), str) else ""
    api_base = (body.get("api_base") or "").strip() if isinstance(body.get("api_base"), str) else ""
    if caller_model:
        model, api_base = caller_model, ""  # the caller's model and credentials (a conversation's)
    if not model:
        raise Invalid("No model is configured for sampling: choose a model (a litellm name such as "
                       "openai/gpt-4o-mini), or reject the request.", status=400)
    system_prompt = body.get("system_prompt") if isinstance(body.get("system_prompt"), str) else row.params.get("systemPrompt")
    approved = {"messages": [{"role": m["role"], "text": m["text"]} for m in messages], "model": model,
                "api_base": api_base, "system_prompt": system_prompt or ""}
    with transaction.atomic():
        updated = ServerRequest.objects.filter(pk=row.pk, status=ServerRequest.Status.PENDING).update(
            status=ServerRequest.Status.GENERATING, answer=approved, answered_by=user, error="",
        )
    if not updated:
        row.refresh_from_db()
        raise Conflict(f"This request is not waiting for approval ({row.status}).", status_now=row.status)
    signals.sampling_approved.send(sender=ServerRequest, server_request=row)  # chat runs it (chat/sampling.py)
    row.refresh_from_db()
    publish_request(row, events.SERVER_REQUEST_UPDATED)
    return row
