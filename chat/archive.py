"""One conversation as one versioned JSON file, and back.

Why: a teammate on another deployment must be able to open the exact conversation (the player)
and re-run it against their own servers, matched by name. The file holds the messages, turns,
tool calls with their full results and projections, widget model context and state, and each
server's name, what it said about itself, its tool definitions and its App views. It holds no
secrets: no server URL, command, env or header, no API key (the API base is masked like a
server URL, tools/mcp/url_secrets.py).

Import reads the whole file and checks every part before it writes anything, all in one
transaction: a malformed, foreign or hostile file gets a clear error and changes nothing.
The imported conversation is owned by the importer and read-only.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import uuid
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Annotated, Any, Literal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError

from chat import settings_schema
from chat.models import Conversation, Message, ModelContext, Turn
from chat.tool_calls import caller, calls_of, turn_id_of
from tools.mcp import url_secrets
from tools.models import Projection, Server, ToolCall, ToolResult, UiResource
from tools.runtime.stored_result import JSONText, serialise

FORMAT = "mcp-inspector/conversation"
VERSION = 1

MAX_MESSAGES = 100_000
MAX_TOOL_CALLS = 50_000
MAX_SERVERS = 500
MAX_TOOLS = 5_000
MAX_VIEWS = 500


class ArchiveError(Exception):
    """A file that cannot be imported; the message says what is wrong and where."""


# --- export -----------------------------------------------------------------------------------------

def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def exported_calls(conversation: Conversation):
    """Every call the conversation made (its replays are not part of it); their full results are
    read when the file is sent (`export_parts`), never here."""
    return (
        calls_of(conversation).exclude(origin=ToolCall.Origin.REPLAY)
        .select_related("full_result", "projection", "model_context", "server").defer("full_result__raw")
        .order_by("queued_at", "pk")
    )


def _server_entry(name: str, server: Server | None, imported: dict[str, Any] | None) -> dict[str, Any]:
    """What the file says about one server: never how to reach it (URL, command, env, headers)."""
    if server is None:
        if imported:  # a conversation imported before: pass on what its file said
            return imported
        return {"name": name, "transport": None, "server_info": {}, "protocol_version": "", "instructions": "",
                "tools": [], "views": []}
    tools = list(server.tools.order_by("name"))
    uris = {t.ui_resource_uri for t in tools if t.ui_resource_uri}
    views = [
        {"uri": r.uri, "mime_type": r.mime_type, "html": r.html, "meta": r.meta}
        for r in UiResource.objects.filter(server=server, uri__in=uris).order_by("uri")
    ]
    return {
        "name": name, "transport": server.transport, "server_info": server.server_info,
        "protocol_version": server.protocol_version, "instructions": server.instructions,
        "tools": [t.definition for t in tools], "views": views,
    }


def export_parts(conversation: Conversation) -> list[Any]:
    """The export file as the JSON text of the document around its full results, and the tool
    call id of each full result where its stored text goes (tools/runtime/stored_result.py SplicedBody):
    the file is sent without any result parsed or held whole."""
    token = secrets.token_hex(16)
    document = export_conversation(conversation, raw=lambda call: f"\x00{token}:{call.pk}\x00")
    text = json.dumps(document, ensure_ascii=False, cls=DjangoJSONEncoder)
    pieces = re.split(r'"\\u0000' + token + r':([0-9a-f-]+)\\u0000"', text)
    # re.split alternates: text, a captured call id, text, ...
    return [piece if i % 2 == 0 else uuid.UUID(piece) for i, piece in enumerate(pieces)]


def export_conversation(conversation: Conversation, raw: Any = None) -> dict[str, Any]:
    """The conversation as a JSON-able document (see the module docstring). `raw(call)` gives
    what stands for a full result (default: the result itself, read from the database)."""
    calls = list(exported_calls(conversation))
    turns = list(conversation.turns.order_by("created_at", "pk"))
    turn_index = {t.pk: i for i, t in enumerate(turns)}
    imported_servers = {s.get("name"): s for s in ((conversation.imported or {}).get("servers") or []) if isinstance(s, dict)}

    servers: dict[str, Server | None] = {}
    for server in conversation.servers.all():
        servers.setdefault(server.name, server)
    for call in calls:
        if call.server_name not in servers or (servers[call.server_name] is None and call.server is not None):
            servers[call.server_name] = call.server

    def call_entry(call: ToolCall) -> dict[str, Any]:
        result, proj, context = call.related_or_none("full_result"), call.related_or_none("projection"), call.related_or_none("model_context")
        return {
            "id": str(call.pk), "server_name": call.server_name, "tool": call.tool_name, "origin": call.origin,
            "arguments": call.arguments, "is_app": call.is_app, "status": call.status, "error": call.error,
            "llm_tool_call_id": call.llm_tool_call_id, "turn": turn_index.get(turn_id_of(call)),
            "queued_at": _iso(call.queued_at), "started_at": _iso(call.started_at), "finished_at": _iso(call.finished_at),
            "duration_ms": call.duration_ms,
            "full_result": None if result is None else {
                "raw": raw(call) if raw else result.raw, "size_bytes": result.size_bytes, "tokens": result.tokens,
                "schema_valid": result.schema_valid, "schema_error": result.schema_error,
            },
            "projection": None if proj is None else {
                "payload": proj.payload, "text": proj.text, "policy": proj.policy, "removed": proj.removed,
                "truncated": proj.truncated, "size_bytes": proj.size_bytes, "tokens": proj.tokens,
            },
            "model_context": None if context is None else {
                "content": context.content, "structured": context.structured, "widget_state": context.widget_state,
            },
        }

    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": timezone.now().isoformat(),
        "conversation": {
            "id": conversation.pk, "title": conversation.title, "model": conversation.model,
            "api_base": url_secrets.mask(conversation.api_base) if conversation.api_base else "",
            "system_prompt": conversation.system_prompt, "temperature": conversation.temperature,
            "created_at": _iso(conversation.created_at), "updated_at": _iso(conversation.updated_at),
        },
        "servers": [_server_entry(name, server, imported_servers.get(name)) for name, server in sorted(servers.items())],
        "turns": [
            {"status": t.status, "error": t.error, "steps": t.steps, "created_at": _iso(t.created_at), "finished_at": _iso(t.finished_at)}
            for t in turns
        ],
        "messages": [
            {
                "seq": m.seq, "role": m.role, "turn": turn_index.get(m.turn_id), "step": m.step, "text": m.text,
                "tool_calls": m.tool_calls, "tool_call": str(m.tool_call_id) if m.tool_call_id else None,
                "llm_tool_call_id": m.llm_tool_call_id, "model": m.model, "usage": m.usage, "created_at": _iso(m.created_at),
            }
            for m in conversation.messages.order_by("seq")
        ],
        "tool_calls": [call_entry(c) for c in calls],
    }


def export_filename(conversation: Conversation) -> str:
    return f"conversation-{conversation.pk}.json"


# --- import: reading and checking -------------------------------------------------------------------

def _reject_constant(name: str) -> Any:
    raise ArchiveError(f"The file contains {name}, which is not valid JSON.")


def parse(data: bytes | str) -> dict[str, Any]:
    """The file as a dict, or ArchiveError: too big, not JSON, too deeply nested, not ours."""
    limit = settings.REPLAY_IMPORT_MAX_BYTES
    if len(data) > limit:
        raise ArchiveError(f"The file is larger than {limit:,} bytes (REPLAY_IMPORT_MAX_BYTES).")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError("The file is not UTF-8 text.") from None
    try:
        document = json.loads(data, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ArchiveError(f"The file is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).") from None
    except RecursionError:
        raise ArchiveError("The file is nested too deeply to be a conversation export.") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ArchiveError(f"This is not a conversation export of the MCP Inspector (expected \"format\": \"{FORMAT}\").")
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ArchiveError("The file has no format version.")
    if version > VERSION:
        raise ArchiveError(f"The file is format version {version}, made by a newer inspector; this one reads version {VERSION}.")
    if version < 1:
        raise ArchiveError(f"Unknown format version {version}.")
    return document


# --- the file's shape ------------------------------------------------------------------------------
#
# Pydantic models of version 1, strict (a string where a number belongs is an error, not a
# conversion) and lenient about keys this version does not know. Missing or null strings read
# as "", missing lists as []. What one field cannot say (ids used twice, references, indexes)
# is checked in _read after validation.

def _iso_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    parsed = parse_datetime(value)
    if parsed is None:
        raise ValueError("must be an ISO 8601 date and time")
    return timezone.make_aware(parsed, dt_timezone.utc) if timezone.is_naive(parsed) else parsed


def _text(max_length: int | None = None):
    """An optional string (null or missing: ""), at most `max_length` characters."""
    return Annotated[StrictStr | None, Field(max_length=max_length), AfterValidator(lambda v: v or "")]


Time = Annotated[StrictStr | None, AfterValidator(_iso_time)]
_BLANK = AfterValidator(lambda v: v or "")  # null or missing: ""
Count = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
Number = StrictInt | StrictFloat


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class ConversationPart(_Part):
    """The conversation's settings: the rules of chat/settings_schema.py, strict as the rest of the file."""

    title: _text(settings_schema.TITLE_MAX_CHARS) = ""
    model: settings_schema.ModelName
    system_prompt: Annotated[settings_schema.SystemPrompt | None, _BLANK] = ""
    temperature: settings_schema.Temperature | None = None
    created_at: Time = None
    id: Count | None = None
    api_base: Annotated[settings_schema.ApiBase | None, _BLANK] = ""


class ToolPart(_Part):
    model_config = ConfigDict(extra="allow", strict=True)  # a tool definition is kept whole
    name: Annotated[StrictStr, Field(max_length=200)]


class ViewPart(_Part):
    uri: Annotated[StrictStr, Field(max_length=1000)]
    mime_type: _text(100) = ""
    html: StrictStr
    meta: dict[str, Any] | None = None


class ServerPart(_Part):
    name: Annotated[StrictStr, Field(max_length=100)]
    transport: _text(20) = ""
    server_info: dict[str, Any] | None = None
    protocol_version: _text(40) = ""
    instructions: _text(200_000) = ""
    tools: Annotated[list[ToolPart], Field(max_length=MAX_TOOLS)] | None = None
    views: Annotated[list[ViewPart], Field(max_length=MAX_VIEWS)] | None = None


class TurnPart(_Part):
    status: Literal[tuple(Turn.Status.values)]  # type: ignore[valid-type]
    error: _text(100_000) = ""
    steps: Count | None = None
    created_at: Time = None
    finished_at: Time = None


class FullResultPart(_Part):
    raw: dict[str, Any]
    tokens: Count | None = None
    schema_valid: StrictBool | None = None
    schema_error: _text(100_000) = ""


class ProjectionPart(_Part):
    payload: dict[str, Any]
    text: StrictStr
    policy: _text(20) = ""
    removed: Annotated[list[Any], Field(max_length=100_000)] | None = None
    truncated: StrictBool | None = None
    tokens: Count | None = None


class ModelContextPart(_Part):
    content: Annotated[list[Any], Field(max_length=10_000)] | None = None
    structured: Any = None
    widget_state: Any = None


class ToolCallPart(_Part):
    id: Annotated[StrictStr, Field(max_length=100)]
    server_name: _text(200) = ""
    tool: Annotated[StrictStr, Field(max_length=200)]
    origin: Literal["llm", "manual", "widget", "view"]
    arguments: dict[str, Any] | None = None
    is_app: StrictBool | None = None
    status: Literal[tuple(ToolCall.Status.values)]  # type: ignore[valid-type]
    error: _text(1_000_000) = ""
    llm_tool_call_id: _text(200) = ""
    turn: Count | None = None
    queued_at: Time = None
    started_at: Time = None
    finished_at: Time = None
    duration_ms: Number | None = None
    full_result: FullResultPart | None = None
    projection: ProjectionPart | None = None
    model_context: ModelContextPart | None = None


class AssistantToolCallPart(_Part):
    model_config = ConfigDict(extra="allow", strict=True)
    id: _text(200) = ""
    name: _text(300) = ""
    arguments: _text() = ""


class MessagePart(_Part):
    seq: Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]
    role: Literal[tuple(Message.Role.values)]  # type: ignore[valid-type]
    turn: Count | None = None
    step: Count | None = None
    text: _text() = ""
    tool_calls: Annotated[list[AssistantToolCallPart], Field(max_length=1000)] | None = None
    tool_call: _text(100) = ""
    llm_tool_call_id: _text(200) = ""
    model: _text(200) = ""
    usage: dict[str, Any] | None = None
    created_at: Time = None


class ArchiveFile(_Part):
    conversation: ConversationPart
    servers: Annotated[list[ServerPart], Field(max_length=MAX_SERVERS)] | None = None
    turns: Annotated[list[TurnPart], Field(max_length=MAX_MESSAGES)] | None = None
    tool_calls: Annotated[list[ToolCallPart], Field(max_length=MAX_TOOL_CALLS)] | None = None
    messages: Annotated[list[MessagePart], Field(max_length=MAX_MESSAGES)] | None = None
    exported_at: _text(100) = ""


def _where(loc: tuple) -> str:
    """A pydantic location as the file's path: ("messages", 3, "role") -> messages[3].role."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the file"


def _validate(document: dict[str, Any]) -> ArchiveFile:
    try:
        return ArchiveFile.model_validate(document)
    except PydanticValidationError as exc:
        error = exc.errors()[0]
        # A union's branches report under their type names (…temperature.int): keep the field's path.
        loc = tuple(p for p in error["loc"] if isinstance(p, int) or (_FIELD.match(p) and p not in _TYPE_NAMES))
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required"
        more = f" ({len(exc.errors()) - 1} more problem(s) after this one)" if len(exc.errors()) > 1 else ""
        raise ArchiveError(f"{_where(loc)}: {message}{more}.") from None


_FIELD = re.compile(r"^[a-z_][a-z0-9_]*$")
_TYPE_NAMES = {"str", "int", "float", "bool", "none", "list", "dict"}


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _read(document: dict[str, Any]) -> dict[str, Any]:
    """Every part of the file checked and converted; nothing is written here."""
    file = _validate(document)
    conv = file.conversation
    conversation = {
        "title": conv.title, "model": conv.model, "system_prompt": conv.system_prompt,
        "temperature": float(conv.temperature) if conv.temperature is not None else None,
        "created_at": conv.created_at, "source_id": conv.id, "api_base": conv.api_base,
    }

    servers = []
    names = set()
    for i, s in enumerate(file.servers or []):
        if s.name in names:
            raise ArchiveError(f"servers[{i}].name: the server “{s.name}” is listed twice.")
        names.add(s.name)
        servers.append({
            "name": s.name, "transport": s.transport, "server_info": s.server_info or {},
            "protocol_version": s.protocol_version, "instructions": s.instructions,
            "tools": document["servers"][i].get("tools") or [],  # tool definitions kept as they were
            "views": [{"uri": v.uri, "mime_type": v.mime_type, "html": v.html, "meta": v.meta or {}} for v in s.views or []],
        })

    turns = []
    for t in file.turns or []:
        status = Turn.Status.STOPPED if t.status == Turn.Status.RUNNING else t.status  # a turn running when exported ended there
        turns.append({"status": status, "error": t.error, "steps": t.steps or 0,
                      "created_at": t.created_at, "finished_at": t.finished_at})

    def turn_index(where: str, value: int | None) -> int | None:
        if value is not None and value >= len(turns):
            raise ArchiveError(f"{where} must be the index of one of the {len(turns)} turns.")
        return value

    calls = []
    call_ids = set()
    for i, c in enumerate(file.tool_calls or []):
        if c.id in call_ids:
            raise ArchiveError(f"tool_calls[{i}].id: the id {c.id!r} is used twice.")
        call_ids.add(c.id)
        entry = {
            "ref": c.id, "server_name": c.server_name, "tool_name": c.tool, "origin": c.origin, "arguments": c.arguments or {},
            "is_app": bool(c.is_app), "status": c.status, "error": c.error, "llm_tool_call_id": c.llm_tool_call_id,
            "turn": turn_index(f"tool_calls[{i}].turn", c.turn), "queued_at": c.queued_at, "started_at": c.started_at,
            "finished_at": c.finished_at, "duration_ms": float(c.duration_ms) if c.duration_ms is not None else None,
            "full_result": None, "projection": None, "model_context": None,
        }
        if entry["status"] in ToolCall.ACTIVE:
            entry["status"], entry["error"] = ToolCall.Status.CANCELLED, entry["error"] or "Not finished when it was exported."
        if (f := c.full_result) is not None:
            entry["full_result"] = {"raw": f.raw, "size_bytes": _json_size(f.raw), "tokens": f.tokens or 0,
                                    "schema_valid": f.schema_valid, "schema_error": f.schema_error}
        if (p := c.projection) is not None:
            entry["projection"] = {"payload": p.payload, "text": p.text, "policy": p.policy, "removed": p.removed or [],
                                   "truncated": bool(p.truncated), "size_bytes": len(p.text.encode()), "tokens": p.tokens or 0}
        if (m := c.model_context) is not None:
            entry["model_context"] = {"content": m.content or [], "structured": m.structured, "widget_state": m.widget_state}
        calls.append(entry)

    messages = []
    seqs = set()
    for i, m in enumerate(file.messages or []):
        if m.seq in seqs:
            raise ArchiveError(f"messages[{i}].seq: {m.seq} is used twice.")
        seqs.add(m.seq)
        ref = m.tool_call or None
        if ref is not None and ref not in call_ids:
            raise ArchiveError(f"messages[{i}].tool_call: no tool call with id {ref!r} in the file.")
        messages.append({
            "seq": m.seq, "role": m.role, "turn": turn_index(f"messages[{i}].turn", m.turn), "step": m.step, "text": m.text,
            "tool_calls": document["messages"][i].get("tool_calls") or [], "tool_call": ref,
            "llm_tool_call_id": m.llm_tool_call_id, "model": m.model, "usage": m.usage, "created_at": m.created_at,
        })
    steps = [(mm["turn"], mm["step"]) for mm in messages if mm["role"] == Message.Role.ASSISTANT and mm["turn"] is not None]
    if len(steps) != len(set(steps)):
        raise ArchiveError("The file has two assistant answers for the same step of a turn.")
    return {"conversation": conversation, "servers": servers, "turns": turns, "calls": calls, "messages": messages,
            "header": {"format": FORMAT, "version": document["version"], "exported_at": file.exported_at}}


# --- import: writing --------------------------------------------------------------------------------

def import_conversation(data: bytes | str, user) -> Conversation:
    """Recreate the file's conversation, read-only, owned by `user`; ArchiveError changes nothing."""
    content = _read(parse(data))
    conv = content["conversation"]
    # The file's digest, so `manage.py replay FILE` run again re-runs this import instead of adding a copy.
    digest = hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=user, title=(conv["title"] or "Imported conversation")[:200], model=conv["model"],
            system_prompt=conv["system_prompt"], temperature=conv["temperature"], read_only=True,
            imported={**content["header"], "source_id": conv["source_id"], "api_base": conv["api_base"],
                      "imported_at": timezone.now().isoformat(), "servers": content["servers"], "sha256": digest},
        )
        turns = [Turn.objects.create(conversation=conversation, status=t["status"], error=t["error"], steps=t["steps"],
                                     finished_at=t["finished_at"]) for t in content["turns"]]
        for turn, t in zip(turns, content["turns"]):
            if t["created_at"]:
                turn.created_at = t["created_at"]
        Turn.objects.bulk_update([t for t, src in zip(turns, content["turns"]) if src["created_at"]], ["created_at"],
                                 batch_size=500)  # PostgreSQL binds at most 65,535 parameters a statement

        calls: dict[str, ToolCall] = {}
        for c in content["calls"]:
            call = ToolCall(
                id=uuid.uuid4(), **caller(conversation, turns[c["turn"]] if c["turn"] is not None else None).row_fields(),
                requested_by=user, origin=c["origin"], server=None, server_name=c["server_name"], tool_name=c["tool_name"],
                llm_tool_call_id=c["llm_tool_call_id"], arguments=c["arguments"], is_app=c["is_app"], status=c["status"],
                error=c["error"], started_at=c["started_at"], finished_at=c["finished_at"], duration_ms=c["duration_ms"],
            )
            calls[c["ref"]] = call
        ToolCall.objects.bulk_create(calls.values())
        stamped = []
        for c in content["calls"]:
            if c["queued_at"]:
                calls[c["ref"]].queued_at = c["queued_at"]
                stamped.append(calls[c["ref"]])
        ToolCall.objects.bulk_update(stamped, ["queued_at"], batch_size=500)
        ToolResult.objects.bulk_create([
            ToolResult(tool_call=calls[c["ref"]], **{**c["full_result"], "raw": JSONText(serialise(c["full_result"]["raw"]))})
            for c in content["calls"] if c["full_result"]
        ], batch_size=200)
        Projection.objects.bulk_create([
            Projection(tool_call=calls[c["ref"]], **c["projection"]) for c in content["calls"] if c["projection"]
        ], batch_size=200)
        ModelContext.objects.bulk_create([
            ModelContext(conversation=conversation, tool_call=calls[c["ref"]], **c["model_context"])
            for c in content["calls"] if c["model_context"]
        ])
        messages = [
            Message(conversation=conversation, seq=m["seq"], role=m["role"], turn=turns[m["turn"]] if m["turn"] is not None else None,
                    step=m["step"], text=m["text"], tool_calls=m["tool_calls"],
                    tool_call=calls[m["tool_call"]] if m["tool_call"] else None, llm_tool_call_id=m["llm_tool_call_id"],
                    model=m["model"], usage=m["usage"])
            for m in content["messages"]
        ]
        Message.objects.bulk_create(messages, batch_size=500)
        stamped_messages = []
        for message, m in zip(messages, content["messages"]):
            if m["created_at"]:
                message.created_at = m["created_at"]
                stamped_messages.append(message)
        if stamped_messages:
            # bulk_create on some databases gives no pks back for update; look them up by seq.
            by_seq = {m.seq: m.pk for m in conversation.messages.only("pk", "seq")}
            for message in stamped_messages:
                message.pk = by_seq[message.seq]
            Message.objects.bulk_update(stamped_messages, ["created_at"], batch_size=500)
        if conv["created_at"]:
            Conversation.objects.filter(pk=conversation.pk).update(created_at=conv["created_at"])
    return conversation


def imported_view(conversation: Conversation, call: ToolCall) -> dict[str, Any] | None:
    """An App view stored in an imported conversation's file, for the player: (tool definition, view)."""
    for server in (conversation.imported or {}).get("servers") or []:
        if server.get("name") != call.server_name:
            continue
        tool = next((t for t in server.get("tools") or [] if t.get("name") == call.tool_name), None)
        from tools.models import app_resource_uri

        uri = app_resource_uri((tool or {}).get("_meta"))
        view = next((v for v in server.get("views") or [] if v.get("uri") == uri), None) if uri else None
        return {"tool": tool, "view": view}
    return None
