"""One conversation as one versioned JSON file, and back.

Why: a teammate on another deployment must be able to open the exact conversation (the player)
and re-run it against their own servers, matched by name. The file holds the messages, turns,
tool calls with their full results and projections, widget model context and state, and each
server's name, what it said about itself, its tool definitions and its App views. It holds no
secrets: no server URL, command, env or header, no API key (the API base is masked like a
server URL, tools/url_secrets.py).

Import reads the whole file and checks every part before it writes anything, all in one
transaction: a malformed, foreign or hostile file gets a clear error and changes nothing.
The imported conversation is owned by the importer and read-only.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from chat.models import Conversation, Message, ModelContext, Turn
from tools import url_secrets
from tools.models import Projection, Server, ToolCall, ToolResult, UiResource

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
    """Every call the conversation made (its replays are not part of it)."""
    return (
        ToolCall.objects.filter(conversation=conversation).exclude(origin=ToolCall.Origin.REPLAY)
        .select_related("full_result", "projection", "model_context", "server").order_by("queued_at", "pk")
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


def export_conversation(conversation: Conversation) -> dict[str, Any]:
    """The conversation as a JSON-able document (see the module docstring)."""
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
            "llm_tool_call_id": call.llm_tool_call_id, "turn": turn_index.get(call.turn_id),
            "queued_at": _iso(call.queued_at), "started_at": _iso(call.started_at), "finished_at": _iso(call.finished_at),
            "duration_ms": call.duration_ms,
            "full_result": None if result is None else {
                "raw": result.raw, "size_bytes": result.size_bytes, "tokens": result.tokens,
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


class _Check:
    """Typed reads from the parsed file, each failure naming where it is (`messages[3].role`)."""

    def __init__(self, where: str, value: Any):
        self.where, self.value = where, value
        if not isinstance(value, dict):
            raise ArchiveError(f"{where} must be an object.")

    def _fail(self, key: str, what: str) -> None:
        raise ArchiveError(f"{self.where}.{key} must be {what}.")

    def str(self, key: str, *, max_len: int | None = None, required: bool = False, choices=None) -> str:
        value = self.value.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            self._fail(key, "a string")
        if max_len is not None and len(value) > max_len:
            self._fail(key, f"at most {max_len} characters")
        if choices is not None and value not in choices:
            self._fail(key, f"one of {', '.join(sorted(choices))}")
        return value

    def int(self, key: str, *, minimum: int = 0, nullable: bool = True) -> int | None:
        value = self.value.get(key)
        if value is None and nullable:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum or value > 2**31 - 1:
            self._fail(key, f"an integer ≥ {minimum}")
        return value

    def number(self, key: str) -> float | None:
        value = self.value.get(key)
        if value is None:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            self._fail(key, "a number")
        return float(value)

    def bool(self, key: str, *, nullable: bool = False) -> bool | None:
        value = self.value.get(key)
        if value is None:
            return None if nullable else False
        if not isinstance(value, bool):
            self._fail(key, "true or false")
        return value

    def obj(self, key: str, *, nullable: bool = True) -> dict | None:
        value = self.value.get(key)
        if value is None and nullable:
            return None
        if not isinstance(value, dict):
            self._fail(key, "an object")
        return value

    def list(self, key: str, *, max_items: int, nullable: bool = True) -> list:
        value = self.value.get(key)
        if value is None and nullable:
            return []
        if not isinstance(value, list):
            self._fail(key, "a list")
        if len(value) > max_items:
            self._fail(key, f"a list of at most {max_items:,} items")
        return value

    def time(self, key: str, *, nullable: bool = True) -> datetime | None:
        value = self.value.get(key)
        if value is None and nullable:
            return None
        parsed = parse_datetime(value) if isinstance(value, str) else None
        if parsed is None:
            self._fail(key, "an ISO 8601 date and time")
        if timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed, dt_timezone.utc)
        return parsed

    def index(self, key: str, size: int) -> int | None:
        value = self.int(key)
        if value is not None and value >= size:
            self._fail(key, f"the index of one of the {size} turns")
        return value


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _read(document: dict[str, Any]) -> dict[str, Any]:
    """Every part of the file checked and converted; nothing is written here."""
    top = _Check("the file", document)
    conv = _Check("conversation", top.obj("conversation", nullable=False))
    conversation = {
        "title": conv.str("title", max_len=200), "model": conv.str("model", max_len=200, required=True),
        "system_prompt": conv.str("system_prompt", max_len=200_000), "temperature": conv.number("temperature"),
        "created_at": conv.time("created_at"), "source_id": conv.int("id"), "api_base": conv.str("api_base", max_len=500),
    }
    if conversation["temperature"] is not None and not 0 <= conversation["temperature"] <= 2:
        raise ArchiveError("conversation.temperature must be between 0 and 2.")

    servers = []
    names = set()
    for i, raw in enumerate(top.list("servers", max_items=MAX_SERVERS)):
        s = _Check(f"servers[{i}]", raw)
        name = s.str("name", max_len=100, required=True)
        if name in names:
            raise ArchiveError(f"servers[{i}].name: the server “{name}” is listed twice.")
        names.add(name)
        tools = s.list("tools", max_items=MAX_TOOLS)
        for j, tool in enumerate(tools):
            t = _Check(f"servers[{i}].tools[{j}]", tool)
            t.str("name", max_len=200, required=True)
        views = []
        for j, view in enumerate(s.list("views", max_items=MAX_VIEWS)):
            v = _Check(f"servers[{i}].views[{j}]", view)
            views.append({"uri": v.str("uri", max_len=1000, required=True), "mime_type": v.str("mime_type", max_len=100),
                          "html": v.str("html", required=True), "meta": v.obj("meta") or {}})
        servers.append({
            "name": name, "transport": s.str("transport", max_len=20), "server_info": s.obj("server_info") or {},
            "protocol_version": s.str("protocol_version", max_len=40), "instructions": s.str("instructions", max_len=200_000),
            "tools": tools, "views": views,
        })

    turns = []
    for i, raw in enumerate(top.list("turns", max_items=MAX_MESSAGES)):
        t = _Check(f"turns[{i}]", raw)
        status = t.str("status", choices=set(Turn.Status.values), required=True)
        if status == Turn.Status.RUNNING:
            status = Turn.Status.STOPPED  # a turn still running when exported ended there
        turns.append({"status": status,
                      "error": t.str("error", max_len=100_000), "steps": t.int("steps") or 0,
                      "created_at": t.time("created_at"), "finished_at": t.time("finished_at")})

    calls = []
    call_ids = set()
    for i, raw in enumerate(top.list("tool_calls", max_items=MAX_TOOL_CALLS)):
        c = _Check(f"tool_calls[{i}]", raw)
        ref = c.str("id", max_len=100, required=True)
        if ref in call_ids:
            raise ArchiveError(f"tool_calls[{i}].id: the id {ref!r} is used twice.")
        call_ids.add(ref)
        arguments = c.obj("arguments") or {}
        entry = {
            "ref": ref, "server_name": c.str("server_name", max_len=200), "tool_name": c.str("tool", max_len=200, required=True),
            "origin": c.str("origin", choices={"llm", "manual", "widget"}, required=True), "arguments": arguments,
            "is_app": c.bool("is_app"), "status": c.str("status", choices=set(ToolCall.Status.values), required=True),
            "error": c.str("error", max_len=1_000_000), "llm_tool_call_id": c.str("llm_tool_call_id", max_len=200),
            "turn": c.index("turn", len(turns)), "queued_at": c.time("queued_at"), "started_at": c.time("started_at"),
            "finished_at": c.time("finished_at"), "duration_ms": c.number("duration_ms"),
            "full_result": None, "projection": None, "model_context": None,
        }
        if entry["status"] in ToolCall.ACTIVE:
            entry["status"], entry["error"] = ToolCall.Status.CANCELLED, entry["error"] or "Not finished when it was exported."
        full = c.obj("full_result")
        if full is not None:
            f = _Check(f"tool_calls[{i}].full_result", full)
            raw_result = f.obj("raw", nullable=False)
            entry["full_result"] = {"raw": raw_result, "size_bytes": _json_size(raw_result), "tokens": f.int("tokens") or 0,
                                    "schema_valid": f.bool("schema_valid", nullable=True), "schema_error": f.str("schema_error", max_len=100_000)}
        proj = c.obj("projection")
        if proj is not None:
            p = _Check(f"tool_calls[{i}].projection", proj)
            payload = p.obj("payload", nullable=False)
            removed = p.list("removed", max_items=100_000)
            entry["projection"] = {"payload": payload, "text": p.str("text", required=True), "policy": p.str("policy", max_len=20),
                                   "removed": removed, "truncated": p.bool("truncated"),
                                   "size_bytes": len(p.str("text", required=True).encode()), "tokens": p.int("tokens") or 0}
        context = c.obj("model_context")
        if context is not None:
            m = _Check(f"tool_calls[{i}].model_context", context)
            entry["model_context"] = {"content": m.list("content", max_items=10_000), "structured": context.get("structured"),
                                      "widget_state": context.get("widget_state")}
        calls.append(entry)

    messages = []
    seqs = set()
    for i, raw in enumerate(top.list("messages", max_items=MAX_MESSAGES)):
        m = _Check(f"messages[{i}]", raw)
        seq = m.int("seq", minimum=1, nullable=False)
        if seq in seqs:
            raise ArchiveError(f"messages[{i}].seq: {seq} is used twice.")
        seqs.add(seq)
        tool_calls = m.list("tool_calls", max_items=1000)
        for j, tc in enumerate(tool_calls):
            t = _Check(f"messages[{i}].tool_calls[{j}]", tc)
            t.str("id", max_len=200), t.str("name", max_len=300), t.str("arguments")
        ref = m.str("tool_call", max_len=100) or None
        if ref is not None and ref not in call_ids:
            raise ArchiveError(f"messages[{i}].tool_call: no tool call with id {ref!r} in the file.")
        usage = m.obj("usage")
        messages.append({
            "seq": seq, "role": m.str("role", choices=set(Message.Role.values), required=True), "turn": m.index("turn", len(turns)),
            "step": m.int("step"), "text": m.str("text"), "tool_calls": tool_calls, "tool_call": ref,
            "llm_tool_call_id": m.str("llm_tool_call_id", max_len=200), "model": m.str("model", max_len=200), "usage": usage,
            "created_at": m.time("created_at"),
        })
    steps = [(mm["turn"], mm["step"]) for mm in messages if mm["role"] == Message.Role.ASSISTANT and mm["turn"] is not None]
    if len(steps) != len(set(steps)):
        raise ArchiveError("The file has two assistant answers for the same step of a turn.")
    return {"conversation": conversation, "servers": servers, "turns": turns, "calls": calls, "messages": messages,
            "header": {"format": FORMAT, "version": document["version"], "exported_at": top.str("exported_at", max_len=100)}}


# --- import: writing --------------------------------------------------------------------------------

def import_conversation(data: bytes | str, user) -> Conversation:
    """Recreate the file's conversation, read-only, owned by `user`; ArchiveError changes nothing."""
    content = _read(parse(data))
    conv = content["conversation"]
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=user, title=(conv["title"] or "Imported conversation")[:200], model=conv["model"],
            system_prompt=conv["system_prompt"], temperature=conv["temperature"], read_only=True,
            imported={**content["header"], "source_id": conv["source_id"], "api_base": conv["api_base"],
                      "imported_at": timezone.now().isoformat(), "servers": content["servers"]},
        )
        turns = [Turn.objects.create(conversation=conversation, status=t["status"], error=t["error"], steps=t["steps"],
                                     finished_at=t["finished_at"]) for t in content["turns"]]
        for turn, t in zip(turns, content["turns"]):
            if t["created_at"]:
                turn.created_at = t["created_at"]
        Turn.objects.bulk_update([t for t, src in zip(turns, content["turns"]) if src["created_at"]], ["created_at"])

        calls: dict[str, ToolCall] = {}
        for c in content["calls"]:
            call = ToolCall(
                id=uuid.uuid4(), conversation=conversation, turn=turns[c["turn"]] if c["turn"] is not None else None,
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
            ToolResult(tool_call=calls[c["ref"]], **c["full_result"]) for c in content["calls"] if c["full_result"]
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
