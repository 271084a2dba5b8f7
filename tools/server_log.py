"""A server's log panel (issue 28.5): every `notifications/message` it sent, in calls and between
them, live over the server's socket (`server.log`, /ws/servers/{id}/), and a level control that
applies on the live connection (`logging/setLevel` on 2025-11-25, the per-request level on
2026-07-28), never reconnecting.

The messages are the ServerLogMessage rows the worker stores as they arrive
(tools/runtime/server_requests.py). Like the JSON-RPC log they may carry any user's arguments, so the
panel is its owner's (and superusers').
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from inspector.api import ApiError, Body, api_view, parse_body
from tools.lookups import reads_log, visible_server
from tools.models import LogLevel, Server, ServerLogMessage
from tools.runtime import lifecycle
from tools.runtime.server_requests import log_json

# How many of the latest messages the page opens with (and a catch-up answers at most).
SHOWN = 500


def latest(server: Server, after: int = 0) -> list[dict]:
    rows = ServerLogMessage.objects.filter(server=server, pk__gt=after).order_by("-id")[:SHOWN]
    return [log_json(row) for row in reversed(rows)]


@require_GET
def server_log(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    readable = reads_log(request.user, server)
    page_data = {"serverId": server.pk, "logs": latest(server) if readable else [], "levels": LogLevel.values}
    return render(request, "tools/server_log.html", {
        "server": server, "tab": "log", "readable": readable, "levels": LogLevel.values, "page_data": page_data,
        "modern": server.protocol_version >= "2026",
    })


@api_view("GET")
def server_logs(request: HttpRequest, pk: int) -> JsonResponse:
    """`?after=<id>`: the messages since, for a page that was away (its socket reconnected)."""
    server = visible_server(request, pk)
    if not reads_log(request.user, server):
        raise ApiError("Only the server's owner reads its log.", status=403)
    try:
        after = int(request.GET.get("after") or 0)
    except ValueError:
        raise ApiError("`after` must be a log message id.") from None
    return JsonResponse({"logs": latest(server, after)})


class LevelBody(Body):
    level: str


@api_view("POST")
def log_level(request: HttpRequest, pk: int) -> JsonResponse:
    """{level}: the level the server logs at, applied on a worker's live connection now (the
    others at their next use) and kept on the server."""
    server = visible_server(request, pk)
    if not reads_log(request.user, server):
        raise ApiError("Only the server's owner sets its log level.", status=403)
    level = parse_body(request, LevelBody).level
    if level and level not in LogLevel.values:
        raise ApiError(f"`level` must be one of {', '.join(LogLevel.values)} (or empty: the server's default).")
    answer = lifecycle.ask_worker(server.pk, "set_log_level", {"level": level}, request.user.pk, "the log level")
    if not answer.get("ok"):
        raise ApiError(f"The level was not set: {answer['error']}", status=502)
    return JsonResponse({"level": answer["level"], "applied": answer["applied"]})
