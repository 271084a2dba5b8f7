"""Rebuild the model's request from the database: messages and projection rows ONLY.

This is the one place LLM requests are built. It never reads the full-result table
(`tools_toolresult`): a test captures its SQL to prove it. What a widget's structured data or
`_meta` holds can therefore never reach the model by this path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from chat.models import Conversation, Message, ModelContext
from chat.toolnames import assign
from tools.projection import cap_text
from tools.models import Projection, Server, Tool, ToolCall

CANCELLED_NOTE = "The tool call was cancelled before it finished."
PENDING_NOTE = "The tool call has not finished."


@dataclass
class LlmRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_map: dict[str, tuple[str, str]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"messages": self.messages, "tools": self.tools}


def usable_servers(conversation: Conversation):
    """Selected servers that are enabled and still visible to the owner (a server may be unshared later)."""
    return conversation.servers.filter(enabled=True).filter(pk__in=Server.objects.visible_to(conversation.owner).values("pk"))


def offered_tools(conversation: Conversation) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """Tools of the usable servers that the model may see (visibility includes "model")."""
    rows = list(
        Tool.objects.filter(server__in=usable_servers(conversation))
        .select_related("server")
        .order_by("server__name", "name")
    )
    rows = [t for t in rows if "model" in (t.visibility or ["model", "app"])]
    names = assign([(str(t.server_id), t.server.name, t.name) for t in rows])
    by_pair = {pair: name for name, pair in names.items()}
    tools = []
    for t in rows:
        schema = t.input_schema if isinstance(t.input_schema, dict) and t.input_schema else {"type": "object", "properties": {}}
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": by_pair[(str(t.server_id), t.name)],
                    "description": (t.description or t.title or t.name)[:1024],
                    "parameters": schema,
                },
            }
        )
    return tools, names


def _context_text(ctx: ModelContext) -> str:
    parts = []
    for block in ctx.content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    if ctx.structured is not None:
        parts.append(json.dumps(ctx.structured, ensure_ascii=False, sort_keys=True))
    if ctx.widget_state is not None:
        parts.append("Widget state: " + json.dumps(ctx.widget_state, ensure_ascii=False, sort_keys=True))
    return "\n".join(p for p in parts if p)


def build(conversation: Conversation) -> LlmRequest:
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt:
        messages.append({"role": "system", "content": conversation.system_prompt})
    for server in usable_servers(conversation).exclude(instructions="").order_by("name"):
        messages.append({"role": "system", "content": f"Instructions from the MCP server “{server.name}”:\n{server.instructions}"})
    contexts = ModelContext.objects.filter(conversation=conversation).select_related("tool_call").order_by("updated_at")
    for ctx in contexts:
        text, _ = cap_text(_context_text(ctx), settings.PROJECTION_TOKEN_CAP)
        if text:
            messages.append(
                {"role": "system", "content": f"Context from the interactive view of the tool “{ctx.tool_call.tool_name}”:\n{text}"}
            )

    # One query: messages joined to their tool call and its projection (never the full result).
    rows = Message.objects.filter(conversation=conversation).select_related("tool_call__projection").order_by("seq")

    for m in rows:
        if m.role == Message.Role.USER:
            messages.append({"role": "user", "content": m.text})
        elif m.role == Message.Role.ASSISTANT:
            entry: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {"id": tc["id"], "type": "function", "function": {"name": tc["name"], "arguments": tc.get("arguments") or "{}"}}
                    for tc in m.tool_calls
                ]
            if entry["content"] is None and "tool_calls" not in entry:
                entry["content"] = ""
            messages.append(entry)
        elif m.role == Message.Role.TOOL:
            if m.tool_call_id is None:
                content = m.text  # e.g. the model asked for a tool that does not exist
            else:
                try:
                    content = m.tool_call.projection.text
                except Projection.DoesNotExist:
                    content = CANCELLED_NOTE if m.tool_call.status == ToolCall.Status.CANCELLED else PENDING_NOTE
            messages.append({"role": "tool", "tool_call_id": m.llm_tool_call_id, "content": content})
        elif m.role == Message.Role.SYSTEM:
            messages.append({"role": "system", "content": m.text})

    tools, tool_map = offered_tools(conversation)
    return LlmRequest(messages=messages, tools=tools, tool_map=tool_map)
