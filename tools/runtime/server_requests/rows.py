"""What every kind of server request shares: its row, its JSON, its events, ending it (the browser's
answer or the worker giving up). The kinds' own rules are in their modules beside this one."""

from __future__ import annotations

import asyncio
from typing import Any

from django.db import close_old_connections, transaction
from django.utils import timezone

from inspector.errors import Conflict
from inspector.events import publish
from tools import callers
from tools.mcp.elicitation import url_problem
from tools.models import ServerRequest, ToolCall
from tools.runtime import events, waits

INVALID_PARAMS = -32602
USER_REJECTED = -1  # the spec's example code for a sampling request the user rejected
SUMMARY_CHARS = 2000


def message_of(params: dict[str, Any]) -> str:
    message = params.get("message")
    return message if isinstance(message, str) else ""


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


async def in_thread(fn, *args):
    """Run ORM work off the pool's loop (it must never block), with fresh DB connections."""
    def run():
        close_old_connections()
        try:
            return fn(*args)
        finally:
            close_old_connections()

    return await asyncio.to_thread(run)


def create(server_id: int, live, method: str, kind: str, params: dict, status: str, error: str) -> ServerRequest:
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


def expire(pk, reason: str, timed_out: bool, live) -> dict | None:
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


def end(row: ServerRequest, user, *, status: str, from_statuses, action: str = "", answer=None, response=None,
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
