"""JSON API for servers, their tools, and tool calls. Auth: session or `Authorization: Token`."""

from __future__ import annotations

import json
from typing import Any, Literal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from pydantic import Field, StrictBool, field_validator, model_validator

from inspector.api import ApiError, Body, api_view, json_body, parse_body
from tools import call_sql, callers, config_file
from tools.forms import ServerForm, form_data_from_json
from tools.lookups import editable_server, own_calls, visible_server
from tools.mcp import tool_headers
from tools.models import OAuthGrant, Server, ServerLogMessage, ServerRequest, ToolCall
from tools.runtime import deadlines, lifecycle, result_cache, stored_result
from tools.runtime.events import pushes_result, tool_call_json
from tools.runtime.lifecycle import start_tool_call
from tools.runtime.server_requests import log_json, server_request_json
from tools.serialisers import oauth_json, server_json, tool_json


def save_server(request: HttpRequest, data: dict, instance: Server | None) -> Server:
    form = ServerForm(data, instance=instance, user=request.user)
    if not form.is_valid():
        raise ApiError("Invalid server settings.", status=400, fields={k: [str(e) for e in v] for k, v in form.errors.items()})
    server = form.save(commit=False)
    if instance is None:
        server.owner = request.user
    server.save()
    result_cache.forget(server.pk)  # results kept for the old settings do not hold for the new ones
    return server


@api_view("GET", "POST")
def servers(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        qs = Server.objects.visible_to(request.user).select_related("owner")
        return JsonResponse({"servers": [server_json(s) for s in qs]})
    server = save_server(request, form_data_from_json(json_body(request)), None)
    return JsonResponse(server_json(server), status=201)


@api_view("GET", "PATCH", "DELETE")
def server_detail(request: HttpRequest, pk: int) -> HttpResponse:
    if request.method == "GET":
        return JsonResponse(server_json(visible_server(request, pk)))
    server = editable_server(request, pk, doing="delete" if request.method == "DELETE" else "edit")
    if request.method == "DELETE":
        server.delete()
        return HttpResponse(status=204)
    server = save_server(request, form_data_from_json(json_body(request), server), server)
    return JsonResponse(server_json(server))


@api_view("POST")
def server_refresh(request: HttpRequest, pk: int) -> JsonResponse:
    server = visible_server(request, pk)
    # `?force=1`: list again even if the server said its last tools list is still fresh (ttlMs).
    force = request.GET.get("force") in ("1", "true")
    answer = lifecycle.ask_worker(server.pk, "refresh", {"reconnect": True, "force": force}, request.user.pk, "the refresh")
    server.refresh_from_db()
    body = {"server": server_json(server), "tools": [tool_json(t) for t in server.tools.all()]}
    if answer.get("cached"):
        body["cached"] = {"fresh_until": answer["fresh_until"], "fetched_at": answer["fetched_at"], "scope": answer["cache_scope"]}
    if not answer.get("ok"):
        return JsonResponse({"error": answer["error"], **body}, status=502)
    return JsonResponse(body)


@api_view("GET")
def server_tools(request: HttpRequest, pk: int) -> JsonResponse:
    server = visible_server(request, pk)
    return JsonResponse({"tools": [tool_json(t) for t in server.tools.all()],
                         "set_aside": [{"name": t["name"], "reason": t["reason"]} for t in server.set_aside_tools or []]})


class CompletionRef(Body):
    type: Literal["ref/prompt", "ref/resource"]
    name: str | None = None
    uri: str | None = None

    @model_validator(mode="after")
    def _named(self) -> CompletionRef:
        if self.type == "ref/prompt" and not self.name:
            raise ValueError("a ref/prompt needs the prompt's `name`")
        if self.type == "ref/resource" and not self.uri:
            raise ValueError("a ref/resource needs the template's `uri`")
        return self


class CompleteBody(Body):
    """`completion/complete`: what the user is typing into one argument, and the ones already filled."""

    ref: CompletionRef
    argument: str = Field(min_length=1, max_length=200)
    value: str = Field(default="", max_length=2000)
    context: dict[str, str] = {}


@api_view("GET")
def oauth_status(request: HttpRequest, pk: int) -> JsonResponse:
    server = visible_server(request, pk)
    return JsonResponse({"oauth": oauth_json(server, request.user)})


@api_view("POST")
def oauth_sign_in(request: HttpRequest, pk: int) -> JsonResponse:
    """Begin the user's sign-in: where to send the browser (a worker did the discovery)."""
    server = visible_server(request, pk)
    if server.auth != "oauth":
        raise ApiError("This server does not use OAuth (set Authorization to OAuth in its settings).", status=409)
    if not server.signs_in:
        raise ApiError(f"This server uses the {server.get_oauth_grant_display()} grant: its client gets each token itself, "
                       "no sign-in.", status=409)
    redirect_uri = request.build_absolute_uri(reverse("oauth_callback"))
    answer = lifecycle.start_sign_in(server.pk, request.user.pk, redirect_uri)
    if not answer.get("ok"):
        return JsonResponse({"error": answer["error"], "flow_id": answer.get("flow_id")}, status=502)
    return JsonResponse({"authorization_url": answer["authorization_url"], "flow_id": answer["flow_id"]})


@api_view("POST")
def oauth_sign_out(request: HttpRequest, pk: int) -> JsonResponse:
    """Forget the user's tokens for this server (their next request asks them to sign in)."""
    server = visible_server(request, pk)
    deleted, _ = OAuthGrant.objects.filter(server=server, user=request.user).delete()
    return JsonResponse({"signed_out": bool(deleted)})


@api_view("POST")
def complete(request: HttpRequest, pk: int) -> JsonResponse:
    """Suggestions for a prompt argument or a resource-template variable (empty when the server
    does not offer completions: the page shows none, quietly)."""
    server = visible_server(request, pk)
    body = parse_body(request, CompleteBody)
    if not server.offers("completions"):
        return JsonResponse({"supported": False, "values": [], "total": None, "hasMore": False})
    params = {"ref": body.ref.model_dump(exclude_none=True), "argument": body.argument, "value": body.value,
              "context": {k: v for k, v in body.context.items() if k != body.argument}}
    wait = settings.COMPLETION_TIMEOUT + settings.MCP_CONNECT_TIMEOUT
    answer = lifecycle.ask_worker(server.pk, "complete", params, request.user.pk, "the completion request",
                                  timeout=wait + 2, expires=wait)
    if not answer.get("ok"):
        raise ApiError(answer["error"], status=502)
    completion = (answer["result"] or {}).get("completion") or {}
    values = [v for v in completion.get("values") or [] if isinstance(v, str)][:100]  # the spec's maximum
    return JsonResponse({"supported": True, "values": values, "total": completion.get("total"),
                         "hasMore": bool(completion.get("hasMore"))})


class CallBody(Body):
    arguments: dict[str, Any] = {}
    # Seconds, overriding the server's call timeout for this call (progress extends it, up to the maximum).
    timeout: float | None = Field(None, strict=True)
    # Send it as an MCP task (2025-11-25) when the tool allows one; one it requires always is.
    task: StrictBool = False

    @field_validator("timeout")
    @classmethod
    def _in_range(cls, value: float | None) -> float | None:
        return None if value is None else deadlines.check_timeout(value)


@api_view("POST")
def tool_call_create(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """Start a call: 202 with its id, or with `?wait=SECONDS` the finished call when it ends within
    that time (one round trip for scripts: its summary, projection and the full result inline up to
    WS_INLINE_RESULT_MAX_BYTES, else `result_url`), else 202 as without. The request's own thread
    waits (inspector/asgi_handler.py: one per request in flight, whatever the view)."""
    wait = _wait_seconds(request)
    call = _start_manual_call(request, pk, name)
    if wait and lifecycle.wait_for_end(call.pk, wait):
        finished = _finished_call_answer(call.pk)
        if finished is not None:
            return finished
    return JsonResponse({"id": str(call.pk), "status": call.status, "trace_id": call.trace_id}, status=202)


def _wait_seconds(request: HttpRequest) -> float:
    raw = request.GET.get("wait", "")
    if not raw:
        return 0.0
    try:
        wait = float(raw)
    except ValueError:
        raise ApiError("`wait` must be a number of seconds.") from None
    if not 0 <= wait <= settings.CALL_WAIT_MAX:
        raise ApiError(f"`wait` must be between 0 and {settings.CALL_WAIT_MAX:g} seconds (CALL_WAIT_MAX).")
    return wait


def _start_manual_call(request: HttpRequest, pk: int, name: str) -> ToolCall:
    server, tool = call_sql.visible_server_and_tool(request.user, pk, name)  # one query, no ORM compilation
    if not server.enabled:
        raise ApiError(f"The server “{server.name}” is disabled; enable it first.", status=409)
    body = parse_body(request, CallBody)
    if tool is None and (aside := tool_headers.find(server, name)) is not None:
        raise ApiError(f"The tool {name!r} was set aside and cannot be called: {aside['reason']}.", status=409)
    if tool is None:
        raise ApiError(f"The server has no tool named {name!r} (refresh the server if it is new).", status=404)
    if body.task and tool.task_support == "forbidden":
        raise ApiError(f"The tool {name!r} does not run as a task: its execution.taskSupport is absent or “forbidden”.")
    return start_tool_call(server=server, tool_name=name, arguments=body.arguments, origin=ToolCall.Origin.MANUAL,
                           user=request.user, tool=tool, timeout=body.timeout, as_task=body.task)


def _finished_call_answer(pk) -> HttpResponse | None:
    """The ended call as `GET /api/tool-calls/{id}/` shows it, the full result inline when it is small
    enough to push on a socket (`result_url` names a bigger one); None if it has not ended after all."""
    # One query: the row, its result's and projection's columns, and the result's stored text
    # when it is small enough to inline (the database casts it; a bigger one is never read here).
    call, inline_text = call_sql.call_with_results(pk)
    if call is None or not call.is_final:
        return None
    data = tool_call_json(call, detail=True)
    data["has_logs"], data["has_server_requests"] = call.has_logs, call.has_server_requests
    result = call.related_or_none("full_result")
    if result is None or not pushes_result(result.size_bytes) or inline_text is None:
        return JsonResponse(data)
    prefix = json.dumps(data, cls=DjangoJSONEncoder)[:-1] + ', "full": '
    return HttpResponse(prefix.encode() + inline_text.encode() + b"}", content_type="application/json")


@api_view("GET")
def tool_call_detail(request: HttpRequest, pk) -> HttpResponse:
    """One call with its complete projection; with the full result too unless `?full=0`."""
    full = request.GET.get("full", "1") not in ("0", "false", "no")
    qs = ToolCall.objects.visible_to(request.user).select_related("full_result", "projection").defer("full_result__raw")
    call = get_object_or_404(qs, pk=pk)
    data = tool_call_json(call, detail=True)
    if not full:
        return JsonResponse(data)
    # The stored JSON text goes into the answer as it is, in pieces: parsing a 40 MB result to
    # serialise it again cost ~10x its size in daphne (bench/big_results.py).
    prefix, suffix = json.dumps(data, cls=DjangoJSONEncoder)[:-1] + ', "full": ', "}"
    stored = stored_result.open_stored(call.pk)  # holds a database handle until read or closed
    if stored is None or stored.octets <= stored_result.PIECE_BYTES:
        full_text = stored.whole() if stored else b"null"
        return HttpResponse(prefix.encode() + full_text + suffix.encode(), content_type="application/json")
    return streamed(stored, prefix, suffix)


def streamed(stored: stored_result.StoredResult, prefix: str = "", suffix: str = "") -> StreamingHttpResponse:
    """An answer carrying a stored result, sent in pieces as it is read (tools/runtime/stored_result.py)."""
    content = stored_result.ResultBody(stored, prefix, suffix)
    response = StreamingHttpResponse(content, content_type="application/json")  # Django will call content.close()
    response["Content-Length"] = str(content.content_length())
    response["Cache-Control"] = "private, no-store"
    return response


@api_view("GET")
def tool_call_result(request: HttpRequest, pk) -> HttpResponse:
    """The full result exactly as stored (`ToolResult.raw`), streamed, for pages and App views.

    The database hands back the column's JSON text in pieces (tools/runtime/stored_result.py), so a
    result of any size is neither parsed nor held whole here; events only say how big it is.
    """
    call = get_object_or_404(ToolCall.objects.visible_to(request.user).only("pk", "status"), pk=pk)
    stored = stored_result.open_stored(call.pk)
    if stored is None:
        raise ApiError(f"This tool call has no result (it is {call.status}).", status=404, call_status=call.status)
    return streamed(stored)


@api_view("GET")
def tool_call_result_preview(request: HttpRequest, pk) -> JsonResponse:
    """The first RESULT_PREVIEW_BYTES of the full result as stored (`text`, cut before a character
    it would split), its size, and whether that is all of it: what a page shows of a big result,
    read without the rest (tools/runtime/stored_result.py `head`); the whole is at `result_url`."""
    call = get_object_or_404(ToolCall.objects.visible_to(request.user).only("pk", "status"), pk=pk)
    shown = stored_result.head(call.pk, settings.RESULT_PREVIEW_BYTES)
    if shown is None:
        raise ApiError(f"This tool call has no result (it is {call.status}).", status=404, call_status=call.status)
    text, octets = shown
    return JsonResponse({"text": text, "size_bytes": octets, "complete": len(text.encode()) == octets,
                         "result_url": f"/api/tool-calls/{call.pk}/result/"})


@api_view("POST")
def tool_call_replay(request: HttpRequest, pk) -> JsonResponse:
    """Run a stored call again (same server, tool and arguments) as a new call with origin `replay`."""
    original = get_object_or_404(ToolCall.objects.visible_to(request.user).select_related("server"), pk=pk)
    if original.server_id is None:
        raise ApiError(f"The server “{original.server_name}” was deleted; this call cannot run again.", status=409)
    if original.origin == ToolCall.Origin.VIEW:
        raise ApiError("This tool belongs to an App view and ran in the browser; the server cannot run it again.", status=409)
    server = visible_server(request, original.server_id)
    call = start_tool_call(server=server, tool_name=original.tool_name, arguments=original.arguments,
                           origin=ToolCall.Origin.REPLAY, user=request.user, replay_of=original,
                           as_task=original.task_mode == "optional")
    return JsonResponse({"id": str(call.pk), "status": call.status, "replay_of": str(original.pk)}, status=202)


@api_view("POST")
def servers_import(request: HttpRequest) -> JsonResponse:
    body = json_body(request)
    created, errors = config_file.import_servers(body, request.user)
    status = 201 if created and not errors else (400 if not created else 207)
    answer: dict[str, Any] = {"created": [server_json(s) for s in created], "errors": errors}
    if not created:
        answer["error"] = "Nothing imported: " + " ".join(f"{e['name'] + ': ' if e['name'] else ''}{e['error']}" for e in errors)
    return JsonResponse(answer, status=status)


@api_view("GET")
def servers_export(request: HttpRequest) -> JsonResponse:
    """Export the user's own servers in mcpServers format; secret values are masked, never sent in clear."""
    qs = Server.objects.filter(owner=request.user)
    response = JsonResponse(config_file.export_servers(qs), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = 'attachment; filename="mcp-servers.json"'
    return response


# --- a call while it runs: Cancel, log messages, what the server asks (tools/runtime/server_requests/) ---------

@api_view("POST")
def tool_call_cancel(request: HttpRequest, pk) -> JsonResponse:
    """Cancel a queued or running call: the server is sent notifications/cancelled; the call ends `cancelled`."""
    call = get_object_or_404(own_calls(request).only("pk", "status", "celery_task_id"), pk=pk)
    if call.is_final:
        raise ApiError(f"This call has already ended ({call.status}).", status=409, call_status=call.status)
    cancelled = lifecycle.cancel_calls([call], "Cancelled by the user.")
    status = ToolCall.objects.filter(pk=pk).values_list("status", flat=True).first()
    return JsonResponse({"id": str(call.pk), "cancelled": bool(cancelled), "status": status}, status=202 if cancelled else 409)


@api_view("GET")
def tool_call_logs(request: HttpRequest, pk) -> JsonResponse:
    """The server's log messages (notifications/message) received during the call."""
    call = get_object_or_404(ToolCall.objects.visible_to(request.user).only("pk"), pk=pk)
    rows = ServerLogMessage.objects.filter(tool_call=call).order_by("at", "id")[:1000]
    return JsonResponse({"logs": [log_json(r) for r in rows]})


@api_view("GET")
def server_requests(request: HttpRequest) -> JsonResponse:
    """Server requests of the user's calls: `?tool_call=<id>`, `?conversation=<id>`, `?open=1`."""
    qs = ServerRequest.objects.visible_to(request.user)
    if request.GET.get("tool_call"):
        qs = qs.filter(tool_call_id=request.GET["tool_call"])
    if request.GET.get("conversation"):
        try:
            # The caller's ref (tools/callers.py): a conversation's calls carry its id.
            qs = qs.filter(tool_call__context__refs__conversation_id=int(request.GET["conversation"]))
        except ValueError:
            raise ApiError("`conversation` must be a conversation id.") from None
    if request.GET.get("open") in ("1", "true", "yes"):
        qs = qs.filter(status__in=ServerRequest.OPEN)
    return JsonResponse({"server_requests": [server_request_json(r) for r in qs.order_by("created_at")[:500]]})


@api_view("GET")
def server_request_detail(request: HttpRequest, pk) -> JsonResponse:
    row = get_object_or_404(ServerRequest.objects.visible_to(request.user), pk=pk)
    data = server_request_json(row, detail=True)
    call = row.tool_call
    data["conversation_model"] = (callers.model(call) or None) if call else None  # the caller's model
    return JsonResponse(data)


@api_view("POST")
def server_request_answer(request: HttpRequest, pk) -> JsonResponse:
    """The user's answer: elicitation `{action: accept|decline|cancel, content?}`; sampling
    `{action: approve, messages, model?, api_base?}`, then `{action: send, text?}`, or `{action: reject}`."""
    row = get_object_or_404(ServerRequest.objects.filter(tool_call__in=own_calls(request).values("pk"))
                            .select_related("tool_call"), pk=pk)
    row = lifecycle.answer(row, request.user, json_body(request))
    return JsonResponse(server_request_json(row, detail=True))
