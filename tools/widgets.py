"""The server side of the MCP Apps host: the view's HTML, and the requests a view may make.

A view may call only tools of its own server whose visibility includes "app"; its calls go
through the tool-call pipeline (origin "widget") like any other, and are stored. What a view
asks the model to know (`ui/update-model-context`) belongs to the chat: chat/view_context.py.
"""

from __future__ import annotations

import base64
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from pydantic import Field

from inspector.api import ApiError, LenientBody, api_view, parse_body
from tools import callers
from tools.api import streamed
from tools.models import Server, Tool, ToolCall, UiResource
from tools.runtime import lifecycle, stored_result
from tools.runtime.lifecycle import start_tool_call

APP_MIME = "text/html;profile=mcp-app"
SKYBRIDGE_MIME = "text/html+skybridge"
DISPLAY_MODES = ("inline", "fullscreen", "pip")


def view_call_of(request: HttpRequest, pk) -> ToolCall:
    """The call that rendered the view, on a server the user can still see."""
    call = get_object_or_404(ToolCall.objects.visible_to(request.user).select_related("server"), pk=pk)
    if call.server_id is None:
        raise ApiError(f"The server “{call.server_name}” was deleted; its view is gone (the stored result is still shown).", status=410)
    if not Server.objects.visible_to(request.user).filter(pk=call.server_id).exists():
        raise Http404("The view's server is no longer shared with you.")
    return call


def _html_of(content: dict) -> str:
    if "text" in content:
        return str(content["text"])
    if "blob" in content:
        return base64.b64decode(content["blob"]).decode("utf-8", errors="replace")
    raise ApiError("The UI resource has neither text nor blob content.", status=502)


def fetch_ui_resource(server: Server, uri: str, user_id: int | None = None) -> UiResource:
    """Read the view through a worker (resources/read, as `user_id` on an OAuth server), cached
    per server and URI."""
    cached = UiResource.objects.filter(server=server, uri=uri).first()
    if cached:
        return cached
    answer = lifecycle.ask_worker(server.pk, "read_resource", {"uri": uri}, user_id, "the view's resources/read")
    if not answer.get("ok"):
        raise ApiError(f"Could not read the view {uri}: {answer['error']}", status=502)
    contents = (answer["result"] or {}).get("contents") or []
    if not contents:
        raise ApiError(f"The server returned no contents for {uri}.", status=502)
    content = contents[0]
    meta = ((content.get("_meta") or {}).get("ui")) or {}
    if not meta:
        listed = lifecycle.ask_worker(server.pk, "resources", {}, user_id, "resources/list")
        for entry in listed.get("resources", []) if listed.get("ok") else []:
            if entry.get("uri") == uri:
                meta = ((entry.get("_meta") or {}).get("ui")) or {}
    resource, _ = UiResource.objects.update_or_create(
        server=server, uri=uri,
        defaults={"mime_type": content.get("mimeType") or "", "html": _html_of(content), "meta": meta},
    )
    return resource


@api_view("GET")
def view(request: HttpRequest, pk) -> JsonResponse:
    """The view of a tool call: the tool's ui:// resource, or an MCP-UI resource in its result."""
    call = view_call_of(request, pk)
    tool = Tool.objects.filter(server=call.server, name=call.tool_name).first()
    if tool and tool.ui_resource_uri:
        resource = fetch_ui_resource(call.server, tool.ui_resource_uri, request.user.pk)
        html, mime, meta = resource.html, resource.mime_type, resource.meta
    elif embedded := stored_result.embedded_view(call.pk):  # never the whole of a big result without one
        # MCP-UI: the view travels inside the result itself.
        html, mime, meta = _html_of(embedded), embedded.get("mimeType") or "", ((embedded.get("_meta") or {}).get("ui")) or {}
    else:
        raise ApiError("This tool call has no interactive view.", status=404)
    return JsonResponse(_view_json(tool, call.tool_name, html, mime, meta, callers.view_state(call)))


@api_view("GET")
def tool_view(request: HttpRequest, pk: int, name: str) -> JsonResponse:
    """The view of an App tool before any call exists: shown while the model is still writing
    the call's arguments, so the view can receive them as tool-input-partial."""
    server = get_object_or_404(Server.objects.visible_to(request.user), pk=pk)
    tool = get_object_or_404(Tool, server=server, name=name)
    if not tool.ui_resource_uri:
        raise ApiError("This tool has no interactive view.", status=404)
    resource = fetch_ui_resource(server, tool.ui_resource_uri, request.user.pk)
    return JsonResponse(_view_json(tool, name, resource.html, resource.mime_type, resource.meta, None))


def _view_json(tool: Tool | None, tool_name: str, html: str, mime: str, meta: dict, context) -> dict[str, Any]:
    """What the widget host needs to mount a view (see static/js/app-view.js). `context`: the
    view's stored state as its caller kept it (`callers.view_state`: content, structured, widget_state), or None."""
    warning = ""
    mime_base = mime.split(";")[0].strip().lower()
    openai = bool(tool and tool.is_openai_widget) or mime == SKYBRIDGE_MIME
    if mime == SKYBRIDGE_MIME:
        warning = "This view uses the older OpenAI Apps SDK mime type text/html+skybridge; it is shown with the window.openai compatibility layer."
    elif mime_base != "text/html":
        warning = f"Unexpected view mime type {mime!r}; expected {APP_MIME}."
    declared = [m for m in (meta.get("displayModes") or meta.get("availableDisplayModes") or DISPLAY_MODES) if m in DISPLAY_MODES]
    return {
        "html": html, "mime_type": mime, "csp": meta.get("csp"), "permissions": meta.get("permissions"),
        "prefersBorder": meta.get("prefersBorder"), "domain": meta.get("domain"), "openai": openai,
        "tool": tool.definition if tool else {"name": tool_name},
        # The Apps SDK shim saves setWidgetState as the view's structured model context.
        "widget_state": (context["widget_state"] if context["widget_state"] is not None else (context["structured"] if openai else None)) if context else None,
        "model_context": {"content": context["content"], "structuredContent": context["structured"]} if context else None,
        "display_modes": declared or ["inline"], "warning": warning,
    }


# Bodies the widget host sends on behalf of a view (MCP Apps params; extra fields are ignored).

class ToolsCallBody(LenientBody):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None


class ReadBody(LenientBody):
    # A URI, not a payload: a megabyte "URI" is refused here, not sent to the server.
    uri: str = Field(min_length=1, max_length=8192)


@api_view("POST")
def tools_call(request: HttpRequest, pk) -> HttpResponse:
    """`tools/call` from a view: own server only, and only tools visible to apps."""
    origin_call = view_call_of(request, pk)
    return _view_tools_call(request, origin_call.server, origin_call)


@api_view("GET")
def preview_view(request: HttpRequest, pk: int) -> JsonResponse:
    """A `ui://` resource as a view, without a call: the workbench's preview, fed by hand."""
    server = get_object_or_404(Server.objects.visible_to(request.user), pk=pk)
    uri = request.GET.get("uri", "").strip()
    if not uri.startswith("ui://"):
        raise ApiError("Give the view's resource as ?uri=ui://…", status=400)
    resource = fetch_ui_resource(server, uri, request.user.pk)
    tools = view_tools(server, uri)
    tool = tools[0] if tools else None
    return JsonResponse(_view_json(tool, tool.name if tool else "", resource.html, resource.mime_type, resource.meta, None))


def view_tools(server: Server, uri: str) -> list[Tool]:
    """The tools of `server` that show the view `uri`: those the model can call first (the view's
    usual caller), then by name."""
    tools = list(Tool.objects.filter(server=server, ui_resource_uri=uri).order_by("name"))
    return sorted(tools, key=lambda t: "model" not in (t.visibility or ["model"]))


@api_view("POST")
def preview_tools_call(request: HttpRequest, pk: int) -> HttpResponse:
    """`tools/call` from a previewed view: the same rules, stored with origin "widget" and no parent call."""
    server = get_object_or_404(Server.objects.visible_to(request.user), pk=pk)
    return _view_tools_call(request, server, None)


@api_view("POST")
def preview_resources_read(request: HttpRequest, pk: int) -> JsonResponse:
    server = get_object_or_404(Server.objects.visible_to(request.user), pk=pk)
    return _view_resources_read(request, server)


def _view_tools_call(request: HttpRequest, server: Server, origin_call: ToolCall | None) -> HttpResponse:
    """Start the view's call and answer with its result once it has ended (the request's thread
    waits: tools/runtime/lifecycle.py wait_for_end)."""
    call = _start_view_call(request, server, origin_call)
    if not lifecycle.wait_for_end(call.pk, settings.MCP_WEB_WAIT):
        raise ApiError("The tool call did not finish in time.", status=504)
    return _view_call_answer(call.pk)


def _start_view_call(request: HttpRequest, server: Server, origin_call: ToolCall | None) -> ToolCall:
    body = parse_body(request, ToolsCallBody)
    name, arguments = body.name, body.arguments or {}
    tool = Tool.objects.filter(server=server, name=name).first()
    if tool is None:
        raise ApiError(f"The view's server has no tool named {name!r}; a view may call only its own server's tools.", status=403)
    if "app" not in (tool.visibility or []):
        raise ApiError(f"The tool {name!r} is not visible to apps (its visibility is {tool.visibility}).", status=403)
    # Views run in autocommit (ATOMIC_REQUESTS is off), so the task is enqueued at once.
    return start_tool_call(
        server=server, tool_name=name, arguments=arguments, origin=ToolCall.Origin.WIDGET, user=request.user,
        caller=callers.of_call(origin_call) if origin_call else None, view_call=origin_call,
    )


def _view_call_answer(pk) -> HttpResponse:
    """The ended call's stored result as it is, in pieces when it is large (never parsed here)."""
    call = ToolCall.objects.only("pk", "status", "error").get(pk=pk)
    stored = stored_result.open_stored(call.pk)
    if stored is not None:
        if stored.octets <= stored_result.PIECE_BYTES:
            return HttpResponse(stored.whole(), content_type="application/json")
        return streamed(stored)
    return JsonResponse({"content": [{"type": "text", "text": call.error or call.status}], "isError": True})


@api_view("POST")
def resources_read(request: HttpRequest, pk) -> JsonResponse:
    return _view_resources_read(request, view_call_of(request, pk).server)


def _view_resources_read(request: HttpRequest, server: Server) -> JsonResponse:
    uri = parse_body(request, ReadBody).uri
    answer = lifecycle.ask_worker(server.pk, "read_resource", {"uri": uri}, request.user.pk, "resources/read")
    if not answer.get("ok"):
        # A server that refused the view's request (an unknown URI) is the view's mistake: a 4xx.
        raise ApiError(answer["error"], status=422 if answer.get("refused") else 502)
    return JsonResponse(answer["result"])
