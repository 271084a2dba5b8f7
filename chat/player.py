"""What the replay player shows: a stored conversation, step by step, without running anything.

Why a module of its own: the player must never start a tool call or an LLM request. It reads
messages, tool calls with their projections, timings and tokens; full results are fetched by
the page from each call's `result_url` as it steps there; App views come from the stored view
(an imported file's) or the view cache, and are fed the stored full result.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404

from chat import archive
from chat.models import Conversation, Message, ModelContext
from chat.tool_calls import calls_of, view_state
from inspector.api import ApiError
from tools.models import Server, Tool, ToolCall, UiResource
from tools.runtime import stored_result
from tools.runtime.events import tool_call_json


def _ms(a, b) -> float | None:
    return round((b - a).total_seconds() * 1000, 1) if a and b else None


def player_json(conversation: Conversation) -> dict[str, Any]:
    """The conversation as turns of steps: user message, model answer (with its usage), tool call."""
    messages = list(conversation.messages.select_related("turn").order_by("seq"))
    # A subquery, not a list of ids: an imported conversation may hold 100,000 calls, and the
    # database finds them itself instead of being sent them back.
    call_ids = conversation.messages.exclude(tool_call_id=None).values("tool_call_id")
    calls = {c.pk: c for c in ToolCall.objects.filter(pk__in=call_ids).select_related("full_result", "projection")
             .defer("full_result__raw")}
    contexts = {mc.tool_call_id: mc for mc in ModelContext.objects.filter(tool_call_id__in=call_ids)}
    turns: list[dict[str, Any]] = []
    by_turn: dict[Any, dict[str, Any]] = {}
    previous = None
    for m in messages:
        key = m.turn_id or f"m{m.seq}"
        turn = by_turn.get(key)
        if turn is None:
            t = m.turn
            turn = {
                "index": len(turns), "id": m.turn_id, "status": t.status if t else None, "error": t.error if t else "",
                "started_at": t.created_at.isoformat() if t else None,
                "finished_at": t.finished_at.isoformat() if t and t.finished_at else None,
                "duration_ms": _ms(t.created_at, t.finished_at) if t else None, "steps": [],
                "tokens": {"prompt": 0, "completion": 0},
            }
            by_turn[key] = turn
            turns.append(turn)
        step: dict[str, Any] = {
            "index": len(turn["steps"]), "seq": m.seq, "role": m.role, "kind": m.role, "text": m.text,
            "created_at": m.created_at.isoformat(), "since_previous_ms": _ms(previous, m.created_at) if previous else None,
            "model": m.model, "usage": m.usage, "llm_step": m.step, "requested_tool_calls": m.tool_calls,
            "llm_tool_call_id": m.llm_tool_call_id, "tool_call": None, "model_context": None,
        }
        previous = m.created_at
        if m.role == Message.Role.ASSISTANT and m.usage:
            turn["tokens"]["prompt"] += m.usage.get("prompt_tokens") or 0
            turn["tokens"]["completion"] += m.usage.get("completion_tokens") or 0
        if m.role == Message.Role.TOOL:
            call = calls.get(m.tool_call_id)
            if call is not None:
                step["tool_call"] = tool_call_json(call, detail=True)
                context = contexts.get(call.pk)
                if context is not None:
                    step["model_context"] = {"content": context.content, "structuredContent": context.structured,
                                             "widget_state": context.widget_state}
            else:
                step["kind"] = "note"  # the model asked for an unknown tool or gave bad arguments
        turn["steps"].append(step)
    return {
        "conversation": {
            "id": conversation.pk, "title": conversation.title, "model": conversation.model,
            "system_prompt": conversation.system_prompt, "read_only": conversation.read_only,
            "imported": {k: v for k, v in (conversation.imported or {}).items() if k != "servers"} or None,
            "created_at": conversation.created_at.isoformat(),
        },
        "turns": turns,
        "step_count": sum(len(t["steps"]) for t in turns),
    }


def view_json(conversation: Conversation, call_id) -> dict[str, Any]:
    """The App view of one of the conversation's calls, without calling any tool."""
    from tools.widgets import _html_of, _view_json, fetch_ui_resource

    call = get_object_or_404(calls_of(conversation).select_related("server"), pk=call_id)
    context = view_state(call)  # the view's stored model context, as tools/widgets.py takes it
    embedded = stored_result.embedded_view(call.pk)  # read in pieces, parsed only if it names a ui:// resource
    if conversation.imported:
        stored = archive.imported_view(conversation, call) or {}
        definition = stored.get("tool") or {"name": call.tool_name}
        tool = Tool(name=call.tool_name, **Tool.fields_from_wire(definition))
        view = stored.get("view")
        if view:
            return _view_json(tool, call.tool_name, view["html"], view.get("mime_type") or "", view.get("meta") or {}, context)
        if embedded:
            return _embedded(tool, call, embedded, context, _html_of, _view_json)
        raise ApiError("The imported file has no view for this tool call.", status=404)
    tool = Tool.objects.filter(server_id=call.server_id, name=call.tool_name).first() if call.server_id else None
    if tool and tool.ui_resource_uri:
        cached = UiResource.objects.filter(server_id=call.server_id, uri=tool.ui_resource_uri).first()
        if cached is None:
            # A resources/read through a worker (never a tool call), only on a server the user may use.
            server = Server.objects.visible_to(conversation.owner).filter(pk=call.server_id).first()
            if server is None:
                raise Http404("The view's server is no longer shared with you.")
            cached = fetch_ui_resource(server, tool.ui_resource_uri, conversation.owner_id)
        return _view_json(tool, call.tool_name, cached.html, cached.mime_type, cached.meta, context)
    if embedded:
        return _embedded(tool, call, embedded, context, _html_of, _view_json)
    raise ApiError("This tool call has no interactive view.", status=404)


def _embedded(tool, call, embedded, context, html_of, view_json_fn) -> dict[str, Any]:
    return view_json_fn(tool, call.tool_name, html_of(embedded), embedded.get("mimeType") or "",
                        ((embedded.get("_meta") or {}).get("ui")) or {}, context)
