"""Calls of a tool an App view registered (origin "view"): the model asked for it, the view runs
it in the browser. The chat page that shows the view claims the call (only one page runs it),
asks the view over the bridge (`tools/call`) and posts the result here; it is then stored like
any result, full row and projection (tools/runtime/pipeline.py `finish_with_result`), and the chat step
waiting on it goes on. A call no page answers ends at its deadline (pipeline `_wait_for_view`).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from pydantic import Field

from inspector.api import ApiError, LenientBody, api_view, parse_body
from tools.models import ToolCall
from tools.runtime import pipeline


class ClaimBody(LenientBody):
    page: str = Field(min_length=8, max_length=64)


class ResultBody(LenientBody):
    page: str = Field(min_length=8, max_length=64)
    result: dict[str, Any] | None = None
    error: str | None = Field(default=None, max_length=10_000)


def _view_call(request: HttpRequest, pk) -> ToolCall:
    call = get_object_or_404(ToolCall.objects.acted_on_by(request.user), pk=pk)
    if call.origin != ToolCall.Origin.VIEW:
        raise ApiError("Only a call of a view's own tool is run by the page.", status=409)
    return call


@api_view("POST")
def claim(request: HttpRequest, pk) -> JsonResponse:
    """The first page to claim a running view call runs it; any other page is told no (409)."""
    call = _view_call(request, pk)
    page = parse_body(request, ClaimBody).page
    won = ToolCall.objects.filter(pk=call.pk, status=ToolCall.Status.RUNNING, view_page="").update(view_page=page)
    if not won and not ToolCall.objects.filter(pk=call.pk, status=ToolCall.Status.RUNNING, view_page=page).exists():
        raise ApiError("Another page runs this call, or it has ended.", status=409)
    return JsonResponse({"claimed": True})


@api_view("POST")
def result(request: HttpRequest, pk) -> JsonResponse:
    """The view's answer: a CallToolResult, or the error the bridge gave."""
    call = _view_call(request, pk)
    body = parse_body(request, ResultBody)
    if call.status != ToolCall.Status.RUNNING or call.view_page != body.page:
        raise ApiError("This page did not claim the call, or it has ended.", status=409)
    loaded = pipeline.load(call.pk)
    # The view's tool is its own: a server tool of the same name says nothing of its policy or schema.
    loaded.tool_is_app = loaded.tool_policy = loaded.tool_output_schema = None
    if body.result is not None and isinstance(body.result.get("content"), list):
        status = pipeline.finish_with_result(loaded, body.result, loaded.server.projection_policy if loaded.server else "")
    else:
        message = body.error or "The view answered without a result."
        status = ToolCall.Status.FAILED
        pipeline.end_call(call.pk, status, f"The view's tool failed: {message}", ending=(ToolCall.Status.RUNNING,))
    return JsonResponse({"status": status})
