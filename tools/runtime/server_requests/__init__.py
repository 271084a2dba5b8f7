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
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from inspector.errors import Conflict
from tools.mcp.errors import RemoteError
from tools.models import ServerRequest, parse_pool_key
from tools.runtime import waits
from tools.runtime.live_calls import LiveCall
from tools.runtime.server_requests import elicitation, log, roots, sampling
from tools.runtime.server_requests.rows import (
    INVALID_PARAMS,
    USER_REJECTED,
    create,
    expire,
    in_thread,
    message_of,
    publish_request,
    server_request_json,
)

ANSWER_MARGIN = 1.0  # seconds kept back from the call's deadline to send the answer


@dataclass(frozen=True)
class Kind:
    """A kind of request: its row kind and its module. A person answers it (the module has
    `refusal(params)`, `answer(row, user, body)`, `unanswered(reason)`), or the inspector does at
    once (`respond(server_id, live, params)`)."""

    row_kind: str
    rules: ModuleType
    answered_at_once: bool = False


# The one table of what a server may ask (the client side of each kind, its SDK callback and
# result model: tools/mcp/server_requests.py KINDS). A new kind is one module beside these plus its entry.
KINDS: dict[str, Kind] = {
    "elicitation/create": Kind(ServerRequest.Kind.ELICITATION, elicitation),
    "sampling/createMessage": Kind(ServerRequest.Kind.SAMPLING, sampling),
    "roots/list": Kind(ServerRequest.Kind.ROOTS, roots, answered_at_once=True),
}
BY_ROW_KIND = {kind.row_kind: kind for kind in KINDS.values() if not kind.answered_at_once}
log_json = log.log_json

__all__ = ["KINDS", "answer", "handle", "log_json", "message_of", "publish_request", "refusal", "server_request_json"]


def refusal(row_kind: str, params: dict[str, Any]) -> str:
    """Why a request of this kind is refused before anyone sees it ('' when it may be shown)."""
    kind = BY_ROW_KIND.get(row_kind)
    return kind.rules.refusal(params) if kind else ""


async def handle(config, method: str, params: dict[str, Any], tag: Any) -> dict[str, Any]:
    """The pool's `on_server_request`: store, show, wait, answer (see the module docstring)."""
    server_id = parse_pool_key(config.key)[0]
    live = tag if isinstance(tag, LiveCall) else None
    if method == "notifications/message":
        # The SDK hands each notification to its own task, and threads finish in any order: one
        # lock per server (taken before the first await, in arrival order) stores them in order.
        async with log.locks.setdefault(server_id, asyncio.Lock()):
            await in_thread(log.store_log, server_id, live, params)
        return {}
    kind = KINDS[method]
    if kind.answered_at_once:
        return await in_thread(kind.rules.respond, server_id, live, params)
    problem = kind.rules.refusal(params)
    if not problem and live is None:
        problem = ("The inspector cannot tell which tool call this request belongs to (it came outside a "
                   "tool call, or while several calls were running on this connection), so nobody can answer it.")
    if problem:
        await in_thread(create, server_id, live, method, kind.row_kind, params, ServerRequest.Status.REFUSED, problem)
        raise RemoteError(INVALID_PARAMS, f"The inspector refused this request: {problem}")
    row = await in_thread(create, server_id, live, method, kind.row_kind, params, ServerRequest.Status.PENDING, "")
    live.open_requests.add(str(row.pk))
    try:
        message = await waits.wait(waits.answer_key(row.pk), live.remaining() - ANSWER_MARGIN)
    finally:
        live.open_requests.discard(str(row.pk))
    if message is None or "ended" in message:
        reason = (message or {}).get("ended") or "The call's time ran out before anyone answered."
        stored = await in_thread(expire, row.pk, reason, message is None, live)
        if stored is None:
            return kind.rules.unanswered(reason)
        message = stored  # answered at the very last moment: that answer stands
    if "error" in message:
        error = message["error"]
        raise RemoteError(error.get("code", USER_REJECTED), error.get("message", "Refused."), error.get("data"))
    return message["result"]


def answer(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    """Apply the browser's answer to `row` (already checked to be the user's to answer)."""
    kind = BY_ROW_KIND.get(row.kind)
    if kind is None:
        raise Conflict("This request is answered by the inspector itself.")
    return kind.rules.answer(row, user, body)
