"""Rebuild the model's request from the database: messages and projection rows ONLY.

This is the one place LLM requests are built. It never reads the full-result table
(`tools_toolresult`): a test captures its SQL to prove it, and that it takes three queries at any
length. What a widget's structured data or `_meta` holds can therefore never reach the model by
this path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from chat.models import Conversation, Message, ModelContext, ViewTools
from chat.toolnames import assign
from tools.models import Server, ToolCall
from tools.runtime.projection import cap_text

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
    # A stand-in for the owner (only its pk is read): loading the user would cost a query per build.
    owner = get_user_model()(pk=conversation.owner_id)
    return conversation.servers.filter(enabled=True).filter(pk__in=Server.objects.visible_to(owner).values("pk"))


def _tool_entry(name: str, description: str, schema: Any) -> dict[str, Any]:
    schema = schema if isinstance(schema, dict) and schema else {"type": "object", "properties": {}}
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": name, "description": description[:1024], "parameters": schema}}


def _servers_and_tools(conversation: Conversation) -> tuple[list[str], list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """Server instructions (as system texts) and the offered tools, in ONE query.

    Tools are those of the usable servers that the model may see (visibility includes "model"),
    that are not withheld, and, when the conversation names some (`offered_tools`), only those.
    """
    rows = (
        usable_servers(conversation)
        .order_by("name", "pk", "tools__name")
        .values_list("pk", "name", "instructions", "tools__name", "tools__title", "tools__description",
                     "tools__input_schema", "tools__visibility", "tools__withheld")
    )
    instructions: list[str] = []
    seen: set[int] = set()
    offered = []
    only = set(conversation.offered_tools or ())
    for server_id, server_name, server_instructions, name, title, description, schema, visibility, withheld in rows:
        if server_id not in seen:
            seen.add(server_id)
            if server_instructions:
                instructions.append(f"Instructions from the MCP server “{server_name}”:\n{server_instructions}")
        # A withheld tool (Tool.withheld: changed since its server's approved version) is not offered.
        if name is not None and not withheld and "model" in (visibility or ["model", "app"]) \
                and (not only or name in only or f"{server_name}/{name}" in only):
            offered.append((str(server_id), server_name, name, description or title or name, schema))
    if conversation.offer_view_tools:
        offered.extend(_view_tools(conversation))
    names = assign([(server_id, server_name, name) for server_id, server_name, name, _, _ in offered])
    by_pair = {pair: llm_name for llm_name, pair in names.items()}
    tools = [_tool_entry(by_pair[(server_id, name)], text, schema) for server_id, _, name, text, schema in offered]
    return instructions, tools, names


VIEW_KEY = "view:"  # tool_map keys of a view's own tools: "view:<tool call id>"
MAX_VIEW_TOOLS = 64  # providers cap the number of tools in a request; server tools come first


def _view_tools(conversation: Conversation) -> list[tuple[str, str, str, str, Any]]:
    """The tools App views of this conversation registered, as (key, "view_<tool>", name,
    description, schema): the model sees them as `view_<tool>__<name>`."""
    rows = (
        ViewTools.objects.filter(conversation=conversation, tool_call__status=ToolCall.Status.SUCCEEDED)
        .order_by("tool_call__queued_at").values_list("tool_call_id", "tool_call__tool_name", "tools")
    )
    return [
        (f"{VIEW_KEY}{call_id}", f"view_{tool_name}", tool["name"],
         f"A tool of the interactive view of “{tool_name}”, run by the view itself. {tool.get('description') or ''}".strip(),
         tool.get("inputSchema"))
        for call_id, tool_name, tools in rows for tool in tools if isinstance(tool, dict) and tool.get("name")
    ][:MAX_VIEW_TOOLS]


def offered_tools(conversation: Conversation) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """Tools of the usable servers that the model may see (visibility includes "model")."""
    _, tools, names = _servers_and_tools(conversation)
    return tools, names


def _context_text(content: Any, structured: Any, widget_state: Any) -> str:
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    if structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    if widget_state is not None:
        parts.append("Widget state: " + json.dumps(widget_state, ensure_ascii=False, sort_keys=True))
    return "\n".join(p for p in parts if p)


def build(conversation: Conversation) -> LlmRequest:
    """The next LLM request, in three queries whatever the length (servers and tools, widget
    contexts, messages with their projection text); rows are read as tuples, not model
    instances, so a long conversation rebuilds in milliseconds at every step."""
    instructions, tools, tool_map = _servers_and_tools(conversation)
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt:
        messages.append({"role": "system", "content": conversation.system_prompt})
    messages.extend({"role": "system", "content": text} for text in instructions)

    contexts = (
        ModelContext.objects.filter(conversation=conversation)
        .order_by("updated_at")
        .values_list("content", "structured", "widget_state", "tool_call__tool_name")
    )
    for content, structured, widget_state, tool_name in contexts:
        text, _ = cap_text(_context_text(content, structured, widget_state), settings.PROJECTION_TOKEN_CAP, conversation.model)
        if text:
            messages.append({"role": "system", "content": f"Context from the interactive view of the tool “{tool_name}”:\n{text}"})

    # One query: messages joined to their tool call and its projection (never the full result).
    rows = (
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("role", "text", "tool_calls", "tool_call_id", "llm_tool_call_id", "tool_call__status",
                     "tool_call__projection__tool_call_id", "tool_call__projection__text")
    )
    for role, text, tool_calls, tool_call_id, llm_tool_call_id, call_status, projection_id, projection_text in rows:
        if role == Message.Role.USER:
            messages.append({"role": "user", "content": text})
        elif role == Message.Role.ASSISTANT:
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool_calls:
                entry["tool_calls"] = [
                    {"id": tc["id"], "type": "function", "function": {"name": tc["name"], "arguments": tc.get("arguments") or "{}"}}
                    for tc in tool_calls
                ]
            if entry["content"] is None and "tool_calls" not in entry:
                entry["content"] = ""
            messages.append(entry)
        elif role == Message.Role.TOOL:
            if tool_call_id is None:
                content = text  # e.g. the model asked for a tool that does not exist
            elif projection_id is not None:
                content = projection_text
            else:
                content = CANCELLED_NOTE if call_status == ToolCall.Status.CANCELLED else PENDING_NOTE
            messages.append({"role": "tool", "tool_call_id": llm_tool_call_id, "content": content})
        elif role == Message.Role.SYSTEM:
            messages.append({"role": "system", "content": text})

    return LlmRequest(messages=messages, tools=tools, tool_map=tool_map)
