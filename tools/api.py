"""JSON API for servers, their tools, and tool calls. Auth: session or `Authorization: Token`."""

from __future__ import annotations

from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404

from inspector.api import ApiError, api_view, json_body
from tools import config_file
from tools.forms import ServerForm, form_data_from_json, masked
from tools.models import Server, Tool, ToolCall, embedded_ui_resource


def server_json(server: Server) -> dict[str, Any]:
    """A server as the API shows it: secrets masked, never in clear."""
    return {
        "id": server.pk,
        "name": server.name,
        "transport": server.transport,
        "command": server.command,
        "args": server.args,
        "env": masked(server.env),
        "cwd": server.cwd,
        "url": server.url,
        "headers": masked(server.headers),
        "owner": server.owner.get_username(),
        "shared": server.shared,
        "enabled": server.enabled,
        "projection_policy": server.projection_policy,
        "server_info": server.server_info,
        "protocol_version": server.protocol_version,
        "capabilities": server.capabilities,
        "instructions": server.instructions,
        "last_connected_at": server.last_connected_at.isoformat() if server.last_connected_at else None,
        "last_error": server.last_error,
        "created_at": server.created_at.isoformat(),
        "updated_at": server.updated_at.isoformat(),
    }


def tool_json(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name, "title": tool.title, "description": tool.description,
        "input_schema": tool.input_schema, "output_schema": tool.output_schema, "annotations": tool.annotations,
        "meta": tool.meta, "is_app": tool.is_app, "ui_resource_uri": tool.ui_resource_uri,
        "visibility": tool.visibility, "projection_policy": tool.effective_policy(),
    }


def visible_server(request: HttpRequest, pk: int) -> Server:
    """A server the user may see; someone else's private server is a 404, not a 403."""
    return get_object_or_404(Server.objects.visible_to(request.user).select_related("owner"), pk=pk)


def editable_server(request: HttpRequest, pk: int) -> Server:
    server = visible_server(request, pk)
    if server.owner_id != request.user.pk and not request.user.is_superuser:
        raise PermissionDenied("Only the owner of this server can change it.")
    return server


def save_server(request: HttpRequest, data: dict, instance: Server | None) -> Server:
    form = ServerForm(data, instance=instance, user=request.user)
    if not form.is_valid():
        raise ApiError("Invalid server settings.", status=400, fields={k: [str(e) for e in v] for k, v in form.errors.items()})
    server = form.save(commit=False)
    if instance is None:
        server.owner = request.user
    server.save()
    return server


def wait_for_worker(async_result, what: str) -> dict[str, Any]:
    """Wait for a worker's answer to an inspector request, with a clear error when none comes."""
    try:
        return async_result.get(timeout=settings.MCP_WEB_WAIT, disable_sync_subtasks=False)
    except CeleryTimeout:
        async_result.revoke()
        raise ApiError(f"No worker answered {what} within {settings.MCP_WEB_WAIT:g} s. Is a Celery worker running?", status=504)


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
    server = editable_server(request, pk)
    if request.method == "DELETE":
        if server.transport == "stdio" and not request.user.is_staff:
            raise PermissionDenied("Only staff users can delete stdio servers.")
        server.delete()
        return HttpResponse(status=204)
    server = save_server(request, form_data_from_json(json_body(request), server), server)
    return JsonResponse(server_json(server))


@api_view("POST")
def server_refresh(request: HttpRequest, pk: int) -> JsonResponse:
    from tools.tasks import server_action

    server = visible_server(request, pk)
    answer = wait_for_worker(server_action.delay(server.pk, "refresh", {"reconnect": True}), "the refresh")
    server.refresh_from_db()
    body = {"server": server_json(server), "tools": [tool_json(t) for t in server.tools.all()]}
    if not answer.get("ok"):
        return JsonResponse({"error": answer["error"], **body}, status=502)
    return JsonResponse(body)


@api_view("GET")
def server_tools(request: HttpRequest, pk: int) -> JsonResponse:
    server = visible_server(request, pk)
    return JsonResponse({"tools": [tool_json(t) for t in server.tools.all()]})


def start_tool_call(
    *, server: Server, tool_name: str, arguments: dict, origin: str, user, conversation=None, turn=None,
    llm_tool_call_id: str = "", replay_of: ToolCall | None = None, enqueue: bool = True,
) -> ToolCall:
    """Create the queued row, then (unless the caller schedules it) enqueue the task after commit."""
    from tools.tasks import execute_tool_call

    tool = Tool.objects.filter(server=server, name=tool_name).first()
    call = ToolCall.objects.create(
        server=server, tool_name=tool_name, arguments=arguments, origin=origin, requested_by=user,
        conversation=conversation, turn=turn, llm_tool_call_id=llm_tool_call_id, is_app=bool(tool and tool.is_app),
        replay_of=replay_of,
    )

    def enqueue_now():
        result = execute_tool_call.apply_async(args=[str(call.pk)])
        ToolCall.objects.filter(pk=call.pk).update(celery_task_id=result.id)

    if enqueue:
        transaction.on_commit(enqueue_now)
    return call


@api_view("POST")
def tool_call_create(request: HttpRequest, pk: int, name: str) -> JsonResponse:
    server = visible_server(request, pk)
    if not server.enabled:
        raise ApiError(f"The server “{server.name}” is disabled; enable it first.", status=409)
    body = json_body(request)
    arguments = body.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ApiError("`arguments` must be a JSON object.")
    if not server.tools.filter(name=name).exists():
        raise ApiError(f"The server has no tool named {name!r} (refresh the server if it is new).", status=404)
    call = start_tool_call(server=server, tool_name=name, arguments=arguments, origin=ToolCall.Origin.MANUAL, user=request.user)
    return JsonResponse({"id": str(call.pk), "status": call.status}, status=202)


def tool_call_json(call: ToolCall) -> dict[str, Any]:
    from tools.pipeline import result_event

    event = result_event(call)
    proj = event["projection"]
    return {
        "id": str(call.pk), "server_id": call.server_id, "server_name": call.server_name, "tool": call.tool_name,
        "origin": call.origin, "has_view": call.is_app or embedded_ui_resource(event["result"]) is not None,
        "status": call.status, "error": call.error, "arguments": call.arguments, "is_app": call.is_app,
        "conversation_id": call.conversation_id, "llm_tool_call_id": call.llm_tool_call_id,
        "full": event["result"], "projection": proj,
        "tokens_full": event["tokens_full"], "tokens_projection": proj["tokens"] if proj else 0,
        "schema_valid": event["schema_valid"], "schema_error": event["schema_error"],
        "duration_ms": call.duration_ms, "policy": proj["policy"] if proj else None,
        "queued_at": call.queued_at.isoformat(),
        "started_at": call.started_at.isoformat() if call.started_at else None,
        "finished_at": call.finished_at.isoformat() if call.finished_at else None,
    }


@api_view("GET")
def tool_call_detail(request: HttpRequest, pk) -> JsonResponse:
    call = get_object_or_404(ToolCall.objects.visible_to(request.user).select_related("server"), pk=pk)
    return JsonResponse(tool_call_json(call))


@api_view("POST")
def tool_call_replay(request: HttpRequest, pk) -> JsonResponse:
    """Run a stored call again (same server, tool and arguments) as a new call with origin `replay`."""
    original = get_object_or_404(ToolCall.objects.visible_to(request.user).select_related("server"), pk=pk)
    if original.server_id is None:
        raise ApiError(f"The server “{original.server_name}” was deleted; this call cannot run again.", status=409)
    server = visible_server(request, original.server_id)
    call = start_tool_call(server=server, tool_name=original.tool_name, arguments=original.arguments,
                           origin=ToolCall.Origin.REPLAY, user=request.user, replay_of=original)
    return JsonResponse({"id": str(call.pk), "status": call.status, "replay_of": str(original.pk)}, status=202)


@api_view("POST")
def servers_import(request: HttpRequest) -> JsonResponse:
    body = json_body(request)
    created, errors = config_file.import_servers(body, request.user)
    status = 201 if created and not errors else (400 if not created else 207)
    return JsonResponse({"created": [server_json(s) for s in created], "errors": errors}, status=status)


@api_view("GET")
def servers_export(request: HttpRequest) -> JsonResponse:
    """Export the user's own servers in mcpServers format; secret values are masked, never sent in clear."""
    qs = Server.objects.filter(owner=request.user)
    response = JsonResponse(config_file.export_servers(qs), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = 'attachment; filename="mcp-servers.json"'
    return response
