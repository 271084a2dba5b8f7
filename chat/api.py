"""JSON API for conversations. Scripts and CI drive the app through these shapes."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from pydantic import Field

from chat import agent, history, settings_schema, tasks
from chat.models import Conversation, ReplayRun, Turn
from chat.settings_schema import ConversationSettings
from chat.tool_calls import calls_of, follow_model
from inspector.api import ApiError, Body, api_view, json_body, parse_body
from tools.runtime.events import summary_queryset, tool_call_json
from tools.models import Server
from tools.runtime.stored_result import SplicedBody


def owned(request: HttpRequest, pk: int) -> Conversation:
    """A conversation to change or continue: its owner's only; anyone else gets a 404."""
    return get_object_or_404(Conversation, pk=pk, owner=request.user)


def readable(request: HttpRequest, pk: int) -> Conversation:
    """A conversation to read: the owner's, or one shared with the team (chat/models.py)."""
    return get_object_or_404(Conversation.objects.visible_to(request.user).select_related("owner"), pk=pk)


class MessageBody(Body):
    text: str = Field(min_length=1)
    # Set when an App view sent the message (ui/message): the tool call whose view it is.
    from_tool_call: uuid.UUID | None = None


def settings_from_body(request: HttpRequest, body: ConversationSettings, partial: bool) -> dict[str, Any]:
    """Model fields to set from `body` (chat/settings_schema.py); on a PATCH (partial) only the fields sent."""
    try:
        out = settings_schema.model_fields(body, partial)
    except ValueError as exc:
        raise ApiError(str(exc)) from None
    if "server_ids" in body.model_fields_set or not partial:
        ids = body.server_ids or []
        servers = list(Server.objects.visible_to(request.user).filter(pk__in=ids))
        missing = sorted(set(ids) - {s.pk for s in servers})
        if missing:
            raise ApiError(f"Unknown server id(s): {missing}.", status=404)
        out["servers"] = servers
    return out


PAGE_SIZE = 200
MAX_PAGE_SIZE = 1000


def conversation_json(c: Conversation) -> dict[str, Any]:
    return {
        "id": c.pk, "title": c.title, "model": c.model, "api_base": c.api_base, "has_api_key": bool(c.api_key),
        "system_prompt": c.system_prompt, "temperature": c.temperature, "status": c.status, "read_only": c.read_only,
        "confirm_view_messages": c.confirm_view_messages, "offer_view_tools": c.offer_view_tools,
        "use_tasks": c.use_tasks, "shared": c.shared, "owner": c.owner.get_username(),
        "server_ids": sorted(s.pk for s in c.servers.all()),
        "created_at": c.created_at.isoformat(), "updated_at": c.updated_at.isoformat(),
    }


def _cursor(request: HttpRequest, name: str) -> int | None:
    """A non-negative integer query parameter (a message seq, or the page size), if given."""
    value = request.GET.get(name)
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except ValueError:
        raise ApiError(f"`{name}` must be a non-negative integer.")
    if number < 0:
        raise ApiError(f"`{name}` must be a non-negative integer.")
    return number


def conversation_page(c: Conversation, request: HttpRequest) -> dict[str, Any]:
    """The conversation with one page of messages and the summaries of their tool calls.

    Why pages: a conversation with thousands of tool calls must load as fast as a short one.
    Default: the newest PAGE_SIZE messages. `?before=<seq>`: the page of older ones.
    `?after=<seq>`: what came after `seq` (a page catching up after a reconnect); its tool calls
    include every call of the turns that ran since, so a call that ended meanwhile is current.
    Tool calls are summaries (tools/runtime/events.py): the full results are at their `result_url`.
    """
    before, after = _cursor(request, "before"), _cursor(request, "after")
    if before is not None and after is not None:
        raise ApiError("Give `before` or `after`, not both.")
    limit = _cursor(request, "limit") or PAGE_SIZE
    limit = min(limit, MAX_PAGE_SIZE)
    messages = c.messages.select_related("from_view")
    if after is not None:
        rows = list(messages.filter(seq__gt=after).order_by("seq")[: limit + 1])
        has_newer, rows = len(rows) > limit, rows[:limit]
        has_older = messages.filter(seq__lte=after).exists()
    else:
        older_than = messages.filter(seq__lt=before) if before is not None else messages
        rows = list(older_than.order_by("-seq")[: limit + 1])
        has_older, rows = len(rows) > limit, rows[:limit][::-1]
        has_newer = before is not None and messages.filter(seq__gte=before).exists()

    shown = [m.tool_call_id for m in rows if m.tool_call_id]
    # The calls of the page's messages, and the calls their App views made (listed under them).
    wanted = Q(pk__in=shown) | Q(view_call_id__in=shown)
    if after is not None:
        since = c.messages.filter(seq=after).values_list("created_at", flat=True).first()
        if since is not None:
            turns = c.turns.filter(Q(status=Turn.Status.RUNNING) | Q(finished_at__gte=since)).values_list("pk", flat=True)
            wanted |= Q(context__local_refs__turn_id__in=list(turns))
    calls = summary_queryset(calls_of(c).filter(wanted)).order_by("queued_at")

    turn = c.turns.order_by("-created_at").first()
    return {
        **conversation_json(c),
        "turn": {"id": turn.pk, "status": turn.status, "steps": turn.steps, "error": turn.error} if turn else None,
        "messages": [agent.message_json(m) for m in rows],
        "tool_calls": [tool_call_json(call) for call in calls],
        "page": {
            "limit": limit,
            "first_seq": rows[0].seq if rows else None,
            "last_seq": rows[-1].seq if rows else after,
            "has_older": has_older,
            "has_newer": has_newer,
        },
    }


@api_view("GET", "POST")
def conversations(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        qs = (Conversation.objects.visible_to(request.user).select_related("owner").prefetch_related("servers")
              .order_by("-updated_at"))
        q = request.GET.get("q", "").replace("\x00", "").strip()  # PostgreSQL refuses NUL in a query
        if q:
            qs = qs.filter(Q(title__icontains=q) | Q(messages__text__icontains=q)).distinct()
        return JsonResponse({"conversations": [conversation_json(c) for c in qs[:200]]})
    fields = settings_from_body(request, parse_body(request, ConversationSettings), partial=False)
    servers = fields.pop("servers")
    conversation = Conversation.objects.create(owner=request.user, **fields)
    conversation.servers.set(servers)
    return JsonResponse(conversation_json(conversation), status=201)


@api_view("GET", "PATCH", "DELETE")
def conversation_detail(request: HttpRequest, pk: int) -> JsonResponse:
    conversation = readable(request, pk) if request.method == "GET" else owned(request, pk)
    if request.method == "DELETE":
        conversation.delete()
        return JsonResponse({}, status=204)
    if request.method == "PATCH":
        fields = settings_from_body(request, parse_body(request, ConversationSettings), partial=True)
        servers = fields.pop("servers", None)
        for key, value in fields.items():
            setattr(conversation, key, value)
        conversation.save()
        if servers is not None:
            conversation.servers.set(servers)
        if "model" in fields:
            follow_model(conversation)
    active = conversation.active_turn()
    if active and tasks.check_turn(active):
        conversation.refresh_from_db()  # a page opened after a worker died must not show "thinking…" forever
    return JsonResponse(conversation_page(conversation, request))


@api_view("POST")
def post_message(request: HttpRequest, pk: int) -> JsonResponse:
    conversation = owned(request, pk)
    if conversation.read_only:
        raise ApiError("This conversation was imported and is read-only: replay it instead.", status=409)
    body = parse_body(request, MessageBody)
    from_view = None
    if body.from_tool_call is not None:
        from_view = calls_of(conversation).filter(pk=body.from_tool_call).first()
        if from_view is None:
            raise ApiError("`from_tool_call` is not a tool call of this conversation.", status=400)
    active = conversation.active_turn()
    if active and not tasks.check_turn(active):
        raise ApiError("A turn is already running in this conversation; wait for it or stop it.", status=409)
    turn = tasks.begin_turn(conversation, body.text, from_view=from_view)
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
    return JsonResponse(history.build(readable(request, pk)).as_json())


@api_view("GET")
def turn_detail(request: HttpRequest, pk: int) -> JsonResponse:
    turn = get_object_or_404(Turn, pk=pk, conversation__in=Conversation.objects.visible_to(request.user))
    return JsonResponse({"id": turn.pk, "status": turn.status, "steps": turn.steps, "error": turn.error,
                         "conversation_id": turn.conversation_id})



# --- replays, export and import (chat/replay.py, chat/live.py, chat/archive.py, chat/player.py) ------

def replay_run_of(request: HttpRequest, pk: int) -> ReplayRun:
    """A run of a conversation the user owns; anyone else's is a 404."""
    return get_object_or_404(ReplayRun.objects.select_related("created_by"), pk=pk, conversation__owner=request.user)


class RecordedReplayBody(Body):
    """Re-run the recorded tool calls against today's servers (chat/replay.py checks the values)."""

    kind: str = "recorded"
    ignore_paths: Any = None  # JSON paths to leave out of the diff (validated by chat/jsondiff.py)
    servers: Any = None  # {recorded server name: server id} overrides


class LiveReplayBody(Body):
    """Replay the user messages with a model as a new conversation (chat/live.py checks the values)."""

    kind: str = "live"
    model: Any = None
    api_base: str | None = None
    api_key: str | None = None
    server_ids: Any = None
    ignore_paths: Any = None


@api_view("GET", "POST")
def replays(request: HttpRequest, pk: int) -> JsonResponse:
    """List a conversation's runs, or start one: `{"kind": "recorded", "ignore_paths", "servers": {name: id}}`
    or `{"kind": "live", "model", "api_base"?, "api_key"?, "server_ids"?, "ignore_paths"?}`."""
    from chat import live, replay

    conversation = owned(request, pk)
    if request.method == "GET":
        runs = conversation.replay_runs.select_related("created_by").order_by("-created_at")[:200]
        return JsonResponse({"replays": [replay.run_json(r, items=False) for r in runs]})
    kind = json_body(request).get("kind", "recorded")
    if kind not in ("recorded", "live"):
        raise ApiError("`kind` must be \"recorded\" or \"live\".")
    try:
        if kind == "recorded":
            body = parse_body(request, RecordedReplayBody)
            run = replay.start_run(conversation, request.user, ignore_paths=body.ignore_paths, servers=body.servers)
        else:
            live_body = parse_body(request, LiveReplayBody)
            run = live.start_live(conversation, request.user, model=live_body.model, api_base=live_body.api_base or "",
                                  api_key=live_body.api_key or "", server_ids=live_body.server_ids,
                                  ignore_paths=live_body.ignore_paths)
    except replay.ReplayError as exc:
        raise ApiError(str(exc), status=exc.status)
    return JsonResponse(replay.run_json(run), status=202)


@api_view("GET", "DELETE")
def replay_detail(request: HttpRequest, pk: int) -> JsonResponse:
    from chat import replay

    run = replay_run_of(request, pk)
    if request.method == "DELETE":
        run.delete()
        return JsonResponse({}, status=204)
    if replay.resume_if_stalled(run):
        run.refresh_from_db()
    return JsonResponse(replay.run_json(run))


@api_view("GET")
def export(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """The conversation as one versioned JSON file (no secrets), for import elsewhere."""
    from chat import archive

    conversation = readable(request, pk)
    # Streamed, each full result as stored: built as one value, a 40 MB result cost ~10x in daphne.
    response = StreamingHttpResponse(SplicedBody(archive.export_parts(conversation)), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{archive.export_filename(conversation)}"'
    response["Cache-Control"] = "private, no-store"
    return response


@api_view("POST")
def import_conversation(request: HttpRequest) -> JsonResponse:
    """The body is an export file; the answer is the new read-only conversation (201)."""
    from django.conf import settings

    from chat import archive

    data = request.read(settings.REPLAY_IMPORT_MAX_BYTES + 1)
    try:
        conversation = archive.import_conversation(data, request.user)
    except archive.ArchiveError as exc:
        raise ApiError(str(exc))
    return JsonResponse({**conversation_json(conversation), "player_url": f"/chat/{conversation.pk}/replay/"}, status=201)


@api_view("GET")
def player(request: HttpRequest, pk: int) -> JsonResponse:
    """Everything the replay player shows, turn by turn; full results stay at their `result_url`."""
    from chat import player as player_data

    return JsonResponse(player_data.player_json(readable(request, pk)))


@api_view("GET")
def player_view(request: HttpRequest, pk: int, call_id) -> JsonResponse:
    """An App view for the player: the stored one (an imported file's) or the server's cached view."""
    from chat import player as player_data

    return JsonResponse(player_data.view_json(readable(request, pk), call_id))
