"""JSON API for conversations. Scripts and CI drive the app through these shapes."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.db.models import Q
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404

from chat import agent, history
from chat.models import Conversation, Turn
from inspector.api import ApiError, api_view, json_body
from tools.api import tool_call_json
from tools.models import Server, ToolCall


def owned(request: HttpRequest, pk: int) -> Conversation:
    """Conversations are private to their owner: anyone else gets a 404."""
    return get_object_or_404(Conversation, pk=pk, owner=request.user)


def settings_from_body(request: HttpRequest, body: dict[str, Any], partial: bool) -> dict[str, Any]:
    allowed = {"model", "api_base", "api_key", "system_prompt", "temperature", "server_ids", "title"}
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(f"Unknown field(s): {', '.join(unknown)}.")
    out: dict[str, Any] = {}
    if "model" in body or not partial:
        model = body.get("model")
        if not isinstance(model, str) or not model.strip():
            raise ApiError("`model` is required: a litellm model name such as openai/gpt-4o-mini or ollama/llama3.")
        out["model"] = model.strip()
    if body.get("api_base"):
        base = str(body["api_base"]).strip()
        if urlsplit(base).scheme not in ("http", "https"):
            raise ApiError("`api_base` must be an http:// or https:// URL.")
        out["api_base"] = base
    elif "api_base" in body:
        out["api_base"] = ""
    if "api_key" in body:
        if body["api_key"] is not None and not isinstance(body["api_key"], str):
            raise ApiError("`api_key` must be a string.")
        out["api_key"] = body["api_key"] or ""
    if "system_prompt" in body:
        out["system_prompt"] = str(body["system_prompt"] or "")
    if "title" in body:
        out["title"] = str(body["title"] or "")[:200]
    if "temperature" in body and body["temperature"] is not None:
        try:
            temperature = float(body["temperature"])
        except (TypeError, ValueError):
            raise ApiError("`temperature` must be a number.")
        if not 0 <= temperature <= 2:
            raise ApiError("`temperature` must be between 0 and 2.")
        out["temperature"] = temperature
    if "server_ids" in body or not partial:
        ids = body.get("server_ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise ApiError("`server_ids` must be a list of server ids.")
        servers = list(Server.objects.visible_to(request.user).filter(pk__in=ids))
        missing = sorted(set(ids) - {s.pk for s in servers})
        if missing:
            raise ApiError(f"Unknown server id(s): {missing}.", status=404)
        out["servers"] = servers
    return out


def conversation_json(c: Conversation, detail: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": c.pk, "title": c.title, "model": c.model, "api_base": c.api_base, "has_api_key": bool(c.api_key),
        "system_prompt": c.system_prompt, "temperature": c.temperature, "status": c.status,
        "server_ids": sorted(s.pk for s in c.servers.all()),
        "created_at": c.created_at.isoformat(), "updated_at": c.updated_at.isoformat(),
    }
    if detail:
        turn = c.turns.order_by("-created_at").first()
        data["turn"] = (
            {"id": turn.pk, "status": turn.status, "steps": turn.steps, "error": turn.error} if turn else None
        )
        data["messages"] = [agent.message_json(m) for m in c.messages.order_by("seq")]
        calls = (
            ToolCall.objects.filter(conversation=c)
            .select_related("full_result", "projection", "server")
            .order_by("queued_at")
        )
        data["tool_calls"] = [tool_call_json(call) for call in calls]
    return data


@api_view("GET", "POST")
def conversations(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        qs = Conversation.objects.filter(owner=request.user).prefetch_related("servers").order_by("-updated_at")
        q = request.GET.get("q", "").strip()
        if q:
            qs = qs.filter(Q(title__icontains=q) | Q(messages__text__icontains=q)).distinct()
        return JsonResponse({"conversations": [conversation_json(c) for c in qs[:200]]})
    fields = settings_from_body(request, json_body(request), partial=False)
    servers = fields.pop("servers")
    conversation = Conversation.objects.create(owner=request.user, **fields)
    conversation.servers.set(servers)
    return JsonResponse(conversation_json(conversation), status=201)


@api_view("GET", "PATCH", "DELETE")
def conversation_detail(request: HttpRequest, pk: int) -> JsonResponse:
    conversation = owned(request, pk)
    if request.method == "DELETE":
        conversation.delete()
        return JsonResponse({}, status=204)
    if request.method == "PATCH":
        fields = settings_from_body(request, json_body(request), partial=True)
        servers = fields.pop("servers", None)
        for key, value in fields.items():
            setattr(conversation, key, value)
        conversation.save()
        if servers is not None:
            conversation.servers.set(servers)
    active = conversation.active_turn()
    if active and agent.close_if_stale(active):
        conversation.refresh_from_db()  # a page opened after a worker died must not show "thinking…" forever
    return JsonResponse(conversation_json(conversation, detail=True))


@api_view("POST")
def post_message(request: HttpRequest, pk: int) -> JsonResponse:
    conversation = owned(request, pk)
    text = json_body(request).get("text")
    if not isinstance(text, str) or not text.strip():
        raise ApiError("`text` must be a non-empty string.")
    active = conversation.active_turn()
    if active and not agent.close_if_stale(active):
        raise ApiError("A turn is already running in this conversation; wait for it or stop it.", status=409)
    turn = agent.start_turn(conversation, text)
    return JsonResponse({"turn_id": turn.pk}, status=202)


@api_view("POST")
def stop(request: HttpRequest, pk: int) -> JsonResponse:
    conversation = owned(request, pk)
    turn = conversation.active_turn()
    if turn is None:
        return JsonResponse({"stopped": False, "detail": "No turn is running."})
    agent.stop_turn(turn)
    return JsonResponse({"stopped": True, "turn_id": turn.pk})


@api_view("GET")
def llm_messages(request: HttpRequest, pk: int) -> JsonResponse:
    """Exactly what the next LLM request would carry (built by the same function the worker uses)."""
    return JsonResponse(history.build(owned(request, pk)).as_json())


@api_view("GET")
def turn_detail(request: HttpRequest, pk: int) -> JsonResponse:
    turn = get_object_or_404(Turn, pk=pk, conversation__owner=request.user)
    return JsonResponse({"id": turn.pk, "status": turn.status, "steps": turn.steps, "error": turn.error,
                         "conversation_id": turn.conversation_id})


