"""Server registry and inspector pages. MCP traffic is delegated to workers (tools.runtime.tasks)."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from inspector.errors import Problem
from tools import callers, config_file
from tools.forms import STDIO_STAFF_ONLY, ServerForm
from tools.lookups import editable_server, log_servers, visible_server
from tools.models import OAuthFlow, ResourceSubscription, RpcFrame, Server, Tool, ToolCall
from tools.runtime import cimd, lifecycle, result_cache, rpclog
from tools.runtime.deadlines import max_timeout, shown_timeout
from tools.runtime.events import tool_call_json
from tools.serialisers import oauth_json, tool_json
from tools.subscriptions import how, offers_subscriptions
from tools.widgets import view_tools

# How long a sign-in may wait for the browser to come back from the authorization server.
OAUTH_FLOW_TTL = timedelta(minutes=10)

# The session remembers the refresh a save queued, for the server page that follows.
REFRESH_SESSION_KEY = "server_refresh_pending"


def _ask_worker(request: HttpRequest, server: Server, action: str, params: dict | None = None) -> dict:
    """Ask a worker on the user's behalf (their own sign-in on an OAuth server)."""
    try:
        return lifecycle.ask_worker(server.pk, action, params, request.user.pk, action.replace("_", " "))
    except Problem as exc:
        return {"ok": False, "error": str(exc)}


@require_GET
def server_list(request: HttpRequest) -> HttpResponse:
    servers = Server.objects.visible_to(request.user).select_related("owner")
    return render(request, "tools/server_list.html", {"servers": servers})


def _form_page(request: HttpRequest, instance: Server | None) -> HttpResponse:
    if request.method == "POST":
        form = ServerForm(request.POST, instance=instance, user=request.user)
        try:
            valid = form.is_valid()
        except PermissionDenied as exc:
            return render(request, "tools/forbidden.html", {"message": str(exc)}, status=403)
        if valid:
            server = form.save(commit=False)
            if instance is None:
                server.owner = request.user
            if server.enabled:
                # The old error is about the old settings; the refresh below writes a new one.
                server.last_error = ""
            server.save()
            result_cache.forget(server.pk)  # kept for the old settings: none of it holds for the new ones
            if server.enabled:
                request.session[REFRESH_SESSION_KEY] = {"pk": server.pk, "since": timezone.now().isoformat()}
                lifecycle.refresh_later(server.pk, request.user.pk)
                messages.success(request, f"Saved “{server.name}”; a worker is connecting to it and listing its tools.")
            else:
                messages.success(request, f"Saved “{server.name}” (disabled: not connected).")
            return redirect("server_detail", pk=server.pk)
    else:
        form = ServerForm(instance=instance, user=request.user)
    return render(request, "tools/server_form.html", {"form": form, "server": instance, "stdio_note": STDIO_STAFF_ONLY})


@require_http_methods(["GET", "POST"])
def server_new(request: HttpRequest) -> HttpResponse:
    return _form_page(request, None)


@require_http_methods(["GET", "POST"])
def server_edit(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        server = editable_server(request, pk)
    except PermissionDenied as exc:
        return render(request, "tools/forbidden.html", {"message": str(exc)}, status=403)
    return _form_page(request, server)


@require_POST
def server_delete(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        server = editable_server(request, pk, doing="delete")
    except PermissionDenied as exc:
        return render(request, "tools/forbidden.html", {"message": str(exc)}, status=403)
    name = server.name
    server.delete()
    messages.success(request, f"Deleted “{name}”.")
    return redirect("server_list")


@require_POST
def server_toggle(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        server = editable_server(request, pk)
    except PermissionDenied as exc:
        return render(request, "tools/forbidden.html", {"message": str(exc)}, status=403)
    server.enabled = not server.enabled
    server.save(update_fields=["enabled", "updated_at"])
    messages.success(request, f"“{server.name}” is now {'enabled' if server.enabled else 'disabled'}.")
    return redirect("server_detail", pk=server.pk)


@require_POST
def server_test(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    # A tools list the server said is still fresh (ttlMs) is reused, unless the user asks again anyway.
    answer = _ask_worker(request, server, "refresh", {"reconnect": True, "force": request.POST.get("force") == "1"})
    if answer.get("ok") and answer.get("cached"):
        messages.info(request, f"Not listed again: the server said its tools list stays fresh until "
                               f"{_clock(answer['fresh_until'])} UTC (its ttlMs). “Refresh anyway” lists now.")
    elif answer.get("ok"):
        messages.success(request, f"Connected: protocol {answer.get('protocol_version') or '?'}, {answer.get('tool_count', 0)} tools.")
    else:
        messages.error(request, f"Connection failed: {answer['error']}")
    return redirect("server_detail", pk=server.pk)


@require_GET
def server_detail(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    return render(
        request,
        "tools/server_detail.html",
        {"server": server, "tools": server.tools.all(), "tab": "overview", "can_edit": server.owner_id == request.user.pk,
         "refresh_since": _pending_refresh(request, server), "default_call_timeout": settings.MCP_CALL_TIMEOUT,
         "max_call_timeout": max_timeout(), "oauth": oauth_json(server, request.user),
         "tools_cache": result_cache.fresh(server, "tools/list", request.user.pk)},
    )


def _clock(iso: str) -> str:
    """HH:MM:SS (UTC) of an ISO time a worker answered."""
    return datetime.fromisoformat(iso).astimezone(dt_timezone.utc).strftime("%H:%M:%S")


def _force(request: HttpRequest) -> dict:
    """`?refresh=1`: ask the server again even if what it sent last is still fresh (its ttlMs)."""
    return {"force": request.GET.get("refresh") == "1"}


@login_not_required
@require_GET
def oauth_client_metadata(request: HttpRequest) -> JsonResponse:
    """The app's Client ID Metadata Document (tools/runtime/cimd.py): public, since authorization servers
    fetch it without a session; it holds no secret."""
    response = JsonResponse(cimd.document())
    response["Cache-Control"] = "public, max-age=3600"
    return response


@require_GET
def oauth_callback(request: HttpRequest) -> HttpResponse:
    """Where an authorization server sends the browser back: the code becomes the user's tokens
    (a worker swaps it), then the server page says how it went. Only the user who started the
    sign-in can finish it."""
    flow = OAuthFlow.objects.select_related("server").filter(state=request.GET.get("state", "")[:100], user=request.user).first()
    if flow is None:
        return render(request, "tools/forbidden.html", {"message": "This sign-in is unknown or belongs to someone else; "
                                                                  "start it again from the server page."}, status=400)
    if flow.status != OAuthFlow.Status.WAITING or flow.finished_at is not None:
        messages.error(request, "This sign-in is already over; start again if you need to.")
        return redirect("server_detail", pk=flow.server_id)
    if timezone.now() - flow.created_at > OAUTH_FLOW_TTL:
        OAuthFlow.objects.filter(pk=flow.pk).update(status=OAuthFlow.Status.FAILED, finished_at=timezone.now(), code_verifier="",
                                                    error="Nobody came back from the authorization server in time.")
        messages.error(request, "This sign-in took too long (over 10 minutes); start again.")
        return redirect("server_detail", pk=flow.server_id)
    if request.GET.get("error"):
        why = f"{request.GET['error']}: {request.GET.get('error_description', '')}".strip(": ")[:500]
        OAuthFlow.objects.filter(pk=flow.pk).update(status=OAuthFlow.Status.FAILED, error=f"The authorization server said {why}",
                                                    finished_at=timezone.now(), code_verifier="")
        messages.error(request, f"Sign-in to “{flow.server.name}” refused: {why}")
        return redirect("server_detail", pk=flow.server_id)
    try:
        answer = lifecycle.finish_sign_in(str(flow.pk), request.GET.get("code", "")[:2000], request.GET.get("iss"))
    except Problem as exc:
        answer = {"ok": False, "error": str(exc)}
    if answer.get("ok"):
        note = f" (listing its tools failed: {answer['refresh_error']})" if answer.get("refresh_error") else ""
        messages.success(request, f"Signed in to “{flow.server.name}”{note}.")
    else:
        messages.error(request, f"Sign-in to “{flow.server.name}” failed: {answer['error']}")
    return redirect("server_detail", pk=flow.server_id)


def _pending_refresh(request: HttpRequest, server: Server) -> str | None:
    """When a save just queued a refresh that has not ended yet: its start time, so the page can
    poll the API and fill in the answer (tools, server info, error) without a reload."""
    pending = request.session.get(REFRESH_SESSION_KEY)
    if not pending or pending.get("pk") != server.pk:
        return None
    since = datetime.fromisoformat(pending["since"])
    if server.last_error or (server.last_connected_at and server.last_connected_at >= since):
        del request.session[REFRESH_SESSION_KEY]
        return None
    return pending["since"]


def _sandbox_data() -> dict[str, str]:
    """Where a page mounts App views from (the sandbox proxy, on its own origin)."""
    return {"sandboxOrigin": settings.SANDBOX_ORIGIN, "sandboxUrl": f"{settings.SANDBOX_ORIGIN}/sandbox/proxy/"}


@require_GET
def tool_detail(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    server = visible_server(request, pk)
    tool = get_object_or_404(server.tools, name=name)
    return render(
        request,
        "tools/tool_detail.html",
        {"server": server, "tool": tool, "tool_json": tool_json(tool), "tab": "tools",
         "default_timeout": shown_timeout(server), "max_timeout": max_timeout(), "page_data": _sandbox_data()},
    )


@require_GET
def resources(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    if not server.offers("resources"):
        return render(request, "tools/resources.html", {"server": server, "tab": "resources", "not_offered": True})
    answer = _ask_worker(request, server, "resources", _force(request))
    read = None
    uri = request.GET.get("uri", "").strip()
    if uri:
        read = _ask_worker(request, server, "read_resource", {"uri": uri, **_force(request)})
        if read.get("ok"):
            read["contents"] = [_render_content(c) for c in (read["result"] or {}).get("contents", [])]
    subscribed = set(ResourceSubscription.objects.filter(server=server, user=request.user).values_list("uri", flat=True))
    return render(
        request,
        "tools/resources.html",
        {"server": server, "answer": answer, "uri": uri, "read": read, "tab": "resources",
         "subscribed": subscribed, "subscribable": offers_subscriptions(server), "subscribe_via": how(server)},
    )


def _render_content(content: dict) -> dict:
    """Decide how a resource content shows: pretty JSON, text, an image, or a download."""
    mime = content.get("mimeType") or ""
    shown = {"uri": content.get("uri"), "mime": mime, "raw": content}
    if "text" in content:
        text = content["text"]
        if "json" in mime:
            try:
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                pass
        shown.update(kind="text", text=text)
    elif "blob" in content:
        if mime.startswith("image/"):
            shown.update(kind="image", data_url=f"data:{mime};base64,{content['blob']}")
        else:
            shown.update(kind="blob", size=len(base64.b64decode(content["blob"] or "", validate=False)))
    return shown


@require_GET
def resource_download(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    uri = request.GET.get("uri", "").strip()
    if not uri:
        return HttpResponse("Give the resource to download: ?uri=<resource URI>.", status=400, content_type="text/plain")
    read = _ask_worker(request, server, "read_resource", {"uri": uri})
    if not read.get("ok"):
        return HttpResponse(read["error"], status=502, content_type="text/plain")
    for content in (read["result"] or {}).get("contents", []):
        if "blob" in content:
            data = base64.b64decode(content["blob"])
            response = HttpResponse(data, content_type=content.get("mimeType") or "application/octet-stream")
            filename = uri.rstrip("/").rsplit("/", 1)[-1] or "resource.bin"
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
            return response
        if "text" in content:
            return HttpResponse(content["text"], content_type="text/plain; charset=utf-8")
    return HttpResponse("The resource has no contents.", status=404, content_type="text/plain")


@require_http_methods(["GET", "POST"])
def prompts(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    if not server.offers("prompts"):
        return render(request, "tools/prompts.html", {"server": server, "tab": "prompts", "not_offered": True})
    answer = _ask_worker(request, server, "prompts", _force(request))
    result = None
    args: dict[str, str] = {}
    name = request.POST.get("prompt") if request.method == "POST" else None
    if name:
        args = {k[4:]: v for k, v in request.POST.items() if k.startswith("arg_") and v != ""}
        result = _ask_worker(request, server, "get_prompt", {"name": name, "arguments": args})
    return render(
        request,
        "tools/prompts.html",
        {"server": server, "answer": answer, "result": result, "selected": name, "submitted": args, "tab": "prompts"},
    )


@require_GET
def rpc_log(request: HttpRequest) -> HttpResponse:
    servers = log_servers(request.user)
    frames = list(_filtered_frames(request)[:200])
    for frame in frames:
        frame.version_probe = rpclog.is_version_probe(frame.method, frame.kind)
    return render(
        request,
        "tools/rpc_log.html",
        {"servers": servers, "frames": frames, "filters": request.GET, "methods": _methods(request),
         "server_names": {str(s.pk): s.name for s in servers}, "probe_label": rpclog.VERSION_PROBE_LABEL},
    )


def _methods(request: HttpRequest) -> list[str]:
    visible = log_servers(request.user).values("pk")
    return list(RpcFrame.objects.filter(server__in=visible).exclude(method="").values_list("method", flat=True).distinct().order_by("method"))


def _filtered_frames(request: HttpRequest):
    frames = RpcFrame.objects.filter(server__in=log_servers(request.user).values("pk")).select_related("server")
    if request.GET.get("server", "").isdigit():
        frames = frames.filter(server_id=int(request.GET["server"]))
    if request.GET.get("method"):
        frames = frames.filter(method=request.GET["method"].replace("\x00", ""))  # PostgreSQL refuses NUL
    if request.GET.get("direction") in ("in", "out"):
        frames = frames.filter(direction=request.GET["direction"])
    return frames.order_by("-at", "-id")


@require_GET
def rpc_log_export(request: HttpRequest) -> JsonResponse:
    frames = [f.as_event() for f in _filtered_frames(request)[:50000]]
    response = JsonResponse({"frames": frames}, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = 'attachment; filename="jsonrpc-log.json"'
    return response


@require_POST
def servers_import_page(request: HttpRequest) -> HttpResponse:
    raw = request.POST.get("config", "")
    upload = request.FILES.get("file")
    if upload:
        raw = upload.read().decode("utf-8", errors="replace")
    try:
        document = json.loads(raw)
        if not isinstance(document, dict):
            raise ValueError("the file must hold a JSON object")
    except ValueError as exc:
        messages.error(request, f"Could not read the configuration: {exc}")
        return redirect("server_list")
    created, errors = config_file.import_servers(document, request.user)
    if created:
        messages.success(request, f"Imported {len(created)} server(s): {', '.join(s.name for s in created)}.")
    for err in errors:
        messages.error(request, f"{err['name'] or 'Import'}: {err['error']}")
    return redirect("server_list")


@require_GET
def workbench(request: HttpRequest, pk) -> HttpResponse:
    """An App view of a stored tool call, without a model: host conditions, console, checks.

    The view gets the call's full stored result, like in the chat; its own tool calls go
    through the pipeline with origin "widget" and are stored.
    """
    call = get_object_or_404(
        ToolCall.objects.visible_to(request.user).select_related("server", "full_result", "projection")
        .defer("full_result__raw"),
        pk=pk,
    )
    server = call.server if call.server_id and Server.objects.visible_to(request.user).filter(pk=call.server_id).exists() else None
    tool = Tool.objects.filter(server=server, name=call.tool_name).first() if server else None
    page_data = {
        "call": tool_call_json(call, detail=True),
        "tool": tool_json(tool) if tool else None,
        "serverId": server.pk if server else None,
        **_sandbox_data(),
    }
    return render(request, "tools/workbench.html", {"call": call, "server": server, "tool": tool, "page_data": page_data,
                                                    "caller_link": callers.link(call)})


# How many stored results of a view's tools the preview offers to fill its data from.
PREVIEW_CALLS = 20


@require_GET
def workbench_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """A `ui://` resource in the workbench without a call: the author writes (or picks from a
    stored call) the tool input and result the view gets."""
    server = visible_server(request, pk)
    uri = request.GET.get("uri", "").strip()
    if not uri.startswith("ui://"):
        return render(request, "tools/forbidden.html", {"message": "Preview needs a view resource: ?uri=ui://…"}, status=400)
    tools = view_tools(server, uri)
    calls = (
        ToolCall.objects.visible_to(request.user)
        .filter(server=server, tool_name__in=[t.name for t in tools], full_result__isnull=False)
        .only("pk", "tool_name", "queued_at", "arguments").order_by("-queued_at")[:PREVIEW_CALLS]
    )
    page_data = {
        "call": None,
        "tool": tool_json(tools[0]) if tools else None,
        "serverId": server.pk,
        "preview": {
            "uri": uri, "tools": [t.name for t in tools],
            "calls": [{"id": str(c.pk), "tool": c.tool_name, "queued_at": c.queued_at.isoformat(), "arguments": c.arguments}
                      for c in calls],
        },
        **_sandbox_data(),
    }
    return render(request, "tools/workbench.html", {
        "call": None, "server": server, "tool": tools[0] if tools else None, "uri": uri, "page_data": page_data,
    })
