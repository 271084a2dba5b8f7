"""Multi round-trip input (2026-07-28, SEP-2322): a call that asks for input rests in the database.

On a 2026-07-28 connection a server does not send elicitation, sampling or roots requests of
its own: it answers `tools/call` with `resultType: "input_required"`, its `inputRequests` and an
opaque `requestState`, and the client calls again with `inputResponses` and the state echoed
verbatim. Here that becomes the same `ServerRequest` rows, events, cards and answer API as a
legacy server's requests (tools/runtime/server_requests.py), with one difference: no worker waits.

- The worker stores the round (`store_round`): one row per request (`protocol` input_required,
  `round`, `input_key`); roots are answered at once from the server's settings; a request the
  inspector refuses (a forbidden schema, a non-http URL, too much sampling text) ends the call
  with the reason. If a person must answer, the call goes `input_required` in the same
  transaction and the worker moves on; its deadline becomes now + MCP_INPUT_TIMEOUT.
- The browser answers through the usual API; once no request of the round is open,
  `requeue_if_answered` queues the call again and lifecycle.answer sends a task, which retries the call with the
  answers (`answers`). A sampling the user rejected ends the call with that message (the
  protocol has no error answer inside `inputResponses`); an elicitation's decline or cancel is
  an answer like accept, and the server decides.
- The sweep ends a call nobody answered at its deadline; Cancel and the chat's Stop end a
  resting call like a queued one (tools/runtime/live_calls.py).

Rounds are bounded (MCP_INPUT_MAX_ROUNDS) and so is the state (MCP_INPUT_STATE_MAX_BYTES). The
state is stored on the call (its size on each round's summary) and is never part of a result,
so the model never sees it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tools import callers
from tools.models import Server, ServerRequest, ToolCall
from tools.runtime import events
from tools.runtime.deadlines import call_timeout
from tools.runtime.server_requests import KINDS, publish_request, refusal

log = logging.getLogger(__name__)

MAX_REQUESTS = 20  # input requests in one round
MAX_KEY_CHARS = 200


class InputRefused(Exception):
    """The round cannot go on (a refused or rejected request, too many rounds, a bad result):
    the call ends failed with this message."""


def is_input_required(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("resultType") == "input_required"


def problem(raw: dict[str, Any]) -> str:
    """What is wrong with an input-required result ('' if nothing): checked before anything is stored."""
    state = raw.get("requestState")
    if state is not None and not isinstance(state, str):
        return f"its requestState must be a string, not {type(state).__name__}."
    limit = settings.MCP_INPUT_STATE_MAX_BYTES
    if isinstance(state, str) and len(state) > limit // 4 and len(state.encode()) > limit:
        return (f"its requestState is {len(state.encode()):,} bytes; the inspector keeps at most {limit:,} "
                "(MCP_INPUT_STATE_MAX_BYTES).")
    requests = raw.get("inputRequests")
    if requests is None:
        return "" if state is not None else "it carries neither inputRequests nor requestState."
    if not isinstance(requests, dict):
        return f"its inputRequests must be a JSON object of requests, not {type(requests).__name__}."
    if len(requests) > MAX_REQUESTS:
        return f"it asks {len(requests)} things at once; at most {MAX_REQUESTS} are accepted."
    for key, request in requests.items():
        if len(key) > MAX_KEY_CHARS:
            return f"an input request key is {len(key)} characters long; at most {MAX_KEY_CHARS} are accepted."
        if not isinstance(request, dict) or request.get("method") not in KINDS:
            method = request.get("method") if isinstance(request, dict) else None
            return f"input request “{key}” is not an elicitation, sampling or roots request (method {method!r})."
        if not isinstance(request.get("params", {}), (dict, type(None))):
            return f"input request “{key}” has params that are not a JSON object."
    return ""


@dataclass
class Round:
    number: int
    pending: int  # requests a person must answer; 0: the call goes on at once


def store_round(call: ToolCall, raw: dict[str, Any]) -> Round:
    """Store one input-required answer of the server: its requests as rows, the state on the call,
    and (if a person must answer) the call `input_required`, all in one transaction.

    Raises InputRefused when the call must end instead (the rows stay, as evidence)."""
    number = call.input_round + 1
    if number > settings.MCP_INPUT_MAX_ROUNDS:
        raise InputRefused(f"The server asked for input more than {settings.MCP_INPUT_MAX_ROUNDS} times in this call; "
                           "the inspector stopped there (MCP_INPUT_MAX_ROUNDS).")
    why = problem(raw)
    if why:
        raise InputRefused(f"The inspector refused the server's request for input: {why}")
    requests: dict[str, Any] = raw.get("inputRequests") or {}
    state = raw.get("requestState")
    now = timezone.now()
    expires = now + timedelta(seconds=settings.MCP_INPUT_TIMEOUT)
    rows: list[ServerRequest] = []
    refused: list[str] = []
    with transaction.atomic():
        roots = None
        for key, request in requests.items():
            method, params = request["method"], request.get("params") or {}
            kind = KINDS[method]
            row = ServerRequest(
                tool_call_id=call.pk, server_id=call.server_id, kind=kind, method=method, params=params,
                protocol=ServerRequest.Protocol.INPUT_REQUIRED, round=number, input_key=key,
                mode=(params.get("mode") or "form") if kind == ServerRequest.Kind.ELICITATION else "",
            )
            if kind == ServerRequest.Kind.ROOTS:
                if roots is None:
                    roots = Server.objects.filter(pk=call.server_id).values_list("roots", flat=True).first() or []
                row.status, row.response, row.answered_at = ServerRequest.Status.ANSWERED, {"result": {"roots": roots}}, now
            elif why := refusal(kind, params):
                row.status, row.error, row.answered_at = ServerRequest.Status.REFUSED, why, now
                refused.append(f"“{key}”: {why}")
            else:
                row.status, row.expires_at = ServerRequest.Status.PENDING, expires
            rows.append(row)
        if refused:  # the call ends: nobody is asked the rest of the round
            for row in rows:
                if row.status == ServerRequest.Status.PENDING:
                    row.status, row.error, row.answered_at = ServerRequest.Status.CANCELLED, "Another request of this round was refused.", now
        pending = sum(row.status == ServerRequest.Status.PENDING for row in rows)
        summary = {"round": number, "keys": list(requests), "kinds": [KINDS[r["method"]] for r in requests.values()],
                   "state_bytes": len(state.encode()) if state else 0, "has_state": state is not None,
                   "at": now.isoformat()}
        changes: dict[str, Any] = {"input_round": number, "input_state": state or "",
                                   "input_rounds": [*call.input_rounds, summary]}
        if pending:
            changes.update(status=ToolCall.Status.INPUT_REQUIRED, deadline_at=expires)
        else:  # answered at once: the worker calls again now, with the lease of a new call
            lease = settings.MCP_CONNECT_TIMEOUT + call_timeout(call) + settings.CALL_LEASE_MARGIN
            changes.update(deadline_at=now + timedelta(seconds=lease))
        still_running = ToolCall.objects.filter(pk=call.pk, status=ToolCall.Status.RUNNING).update(**changes)
        if not still_running:  # cancelled (or ended by the sweep) meanwhile: nobody is asked anything
            raise InputRefused("The call was ended while the server asked for input.")
        ServerRequest.objects.bulk_create(rows)
        for name, value in changes.items():
            setattr(call, name, value)
        transaction.on_commit(lambda: _publish(call, rows, bool(pending)))
    if refused:
        raise InputRefused("The inspector refused the server's request for input " + "; ".join(refused))
    return Round(number, pending)


def _publish(call: ToolCall, rows: list[ServerRequest], resting: bool) -> None:
    for row in rows:
        publish_request(row, events.SERVER_REQUEST_CREATED, callers.groups(call.context))
    if resting:
        events.publish_tool_call(events.TOOL_CALL_STATUS, call.pk)


def answers(call: ToolCall) -> tuple[dict[str, Any], str | None]:
    """The `inputResponses` and `requestState` for the retry of the call's latest round."""
    responses: dict[str, Any] = {}
    rows = ServerRequest.objects.filter(tool_call_id=call.pk, protocol=ServerRequest.Protocol.INPUT_REQUIRED,
                                        round=call.input_round)
    for row in rows:
        response = row.response or {}
        if "result" in response:
            responses[row.input_key] = response["result"]
            continue
        error = (response.get("error") or {}).get("message") or row.error or f"it ended {row.status}"
        raise InputRefused(f"The server's {row.kind} request “{row.input_key}” was not answered: {error}")
    has_state = bool(call.input_rounds) and call.input_rounds[-1].get("has_state", bool(call.input_state))
    return responses, call.input_state if has_state else None


def requeue_if_answered(row: ServerRequest) -> bool:
    """After an answer: once no request of the call's round is open, queue the call again (its
    task is sent by tools/runtime/lifecycle.py `answer`). True if it was queued (this answer was the last one)."""
    if row.protocol != ServerRequest.Protocol.INPUT_REQUIRED or row.is_open or row.tool_call_id is None:
        return False
    if ServerRequest.objects.filter(tool_call_id=row.tool_call_id, round=row.round, status__in=ServerRequest.OPEN).exists():
        return False
    now = timezone.now()
    queued = ToolCall.objects.filter(pk=row.tool_call_id, status=ToolCall.Status.INPUT_REQUIRED).update(
        status=ToolCall.Status.QUEUED, attempts=0, dispatched_at=now,
        deadline_at=now + timedelta(seconds=settings.CALL_QUEUE_DEADLINE),  # for a worker to take it again
    )
    if not queued:
        return False
    events.publish_tool_call(events.TOOL_CALL_STATUS, row.tool_call_id)
    return True


def close_open_requests(tool_call_id, status: str, reason: str) -> int:
    """End the call's open requests (the call was cancelled, or nobody answered in time)."""
    rows = list(ServerRequest.objects.filter(tool_call_id=tool_call_id, status__in=ServerRequest.OPEN,
                                             protocol=ServerRequest.Protocol.INPUT_REQUIRED))
    now = timezone.now()
    for row in rows:
        elicitation = row.kind == ServerRequest.Kind.ELICITATION
        if ServerRequest.objects.filter(pk=row.pk, status__in=ServerRequest.OPEN).update(
            status=status, error=reason, answered_at=now, action="cancel" if elicitation else "",
        ):
            row.status, row.error, row.answered_at = status, reason, now
            publish_request(row, events.SERVER_REQUEST_UPDATED)
    return len(rows)
