"""What an App view gives the model, both the chat's: what it asks the model to know
(`ui/update-model-context`, or the Apps SDK's `setWidgetState`; the latest per view is a
ModelContext row that enters the next LLM request), and the tools it registers (a ViewTools
row, offered to the model when the conversation says so; chat/history.py). Both arrive from
the view's host page like the view's other requests (tools/widgets.py), under
/api/tool-calls/{id}/widget/.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from pydantic import Field

from chat.models import ModelContext, ViewTools
from chat.tool_calls import conversation_id_of
from inspector.api import ApiError, LenientBody, api_view, parse_body
from tools.widgets import view_call_of


class ModelContextBody(LenientBody):
    content: list[Any] | None = None
    structuredContent: Any = None
    widgetState: Any = None
    widget_state_flag: Any = Field(default=None, alias="_widgetState")


@api_view("POST")
def model_context(request: HttpRequest, pk) -> JsonResponse:
    """The latest update per view replaces the last."""
    call = view_call_of(request, pk)
    conversation_id = conversation_id_of(call)
    if conversation_id is None:
        raise ApiError("Model context needs a conversation; this view was opened outside a chat.", status=409)
    body = parse_body(request, ModelContextBody)
    fields: dict[str, Any] = {"conversation_id": conversation_id, "content": body.content or [],
                              "structured": body.structuredContent}
    if body.widgetState is not None or body.widget_state_flag:
        fields["widget_state"] = body.widgetState
    ModelContext.objects.update_or_create(tool_call=call, defaults=fields)
    return JsonResponse({})


# --- the tools a view registers ---------------------------------------------------------------------

class ViewToolEntry(LenientBody):
    name: str = Field(min_length=1, max_length=128)
    description: str | None = Field(default=None, max_length=4000)
    inputSchema: dict[str, Any] | None = None


class ViewToolsBody(LenientBody):
    tools: list[ViewToolEntry] = Field(max_length=100)


@api_view("POST")
def view_tools(request: HttpRequest, pk) -> JsonResponse:
    """The view's answer to the host's `tools/list`, as the chat page got it: kept per view, so
    the model can be offered them (when the conversation says so) and call them (origin "view")."""
    call = view_call_of(request, pk)
    conversation_id = conversation_id_of(call)
    if conversation_id is None:
        raise ApiError("A view's tools are offered to a model only in a chat; this view was opened outside one.", status=409)
    body = parse_body(request, ViewToolsBody)
    tools, names = [], set()
    for t in body.tools:  # a name listed twice would offer the model two functions of one name
        if t.name not in names:
            names.add(t.name)
            tools.append({"name": t.name, "description": t.description or "", "inputSchema": t.inputSchema or {"type": "object"}})
    ViewTools.objects.update_or_create(tool_call=call, defaults={"conversation_id": conversation_id, "tools": tools})
    return JsonResponse({"tools": len(tools)})
