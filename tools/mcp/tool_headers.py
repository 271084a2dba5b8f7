"""Tools set aside for an invalid `x-mcp-header` (2026-07-28, SEP-2243: custom `Mcp-Param-*` headers).

A tool's input schema may mark a property with `x-mcp-header: <Name>` so its value travels as
the HTTP header `Mcp-Param-<Name>` too. The spec says a client MUST drop a tool whose annotations
are invalid (empty or not an RFC 9110 token, on a number/object/array/null property, off the
plain `properties` chain, duplicated regardless of case). The `mcp` SDK's client drops them on
2026-07-28 connections only (`ClientSession._absorb_tool_listing`); this module applies the same
check (the SDK's own `find_invalid_x_mcp_header`) under the same condition, but keeps what it
drops: a set-aside tool is stored on the server with the reason and shown apart, never as a tool
(so it is neither offered to a model nor callable).
"""

from __future__ import annotations

from typing import Any

from mcp.client.session import ClientSession
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def invalid_reason(tool: dict[str, Any]) -> str | None:
    """Why this listed tool's `x-mcp-header` annotations are invalid, or None if they are fine."""
    return find_invalid_x_mcp_header(tool.get("inputSchema"))


def set_aside(tools: list[dict[str, Any]], protocol_version: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(tools kept, tools set aside as `{"name", "reason", "definition"}`), as the SDK's client
    filters a listing: only on a 2026-07-28 (modern) connection, where `x-mcp-header` means something."""
    if protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return tools, []
    kept, aside = [], []
    for tool in tools:
        reason = invalid_reason(tool)
        if reason is None:
            kept.append(tool)
        else:
            aside.append({"name": str(tool.get("name", "")), "reason": f"invalid x-mcp-header: {reason}", "definition": tool})
    return kept, aside


def find(server: Any, name: str) -> dict[str, Any] | None:
    """The set-aside entry of `server` (a tools.models.Server) named `name`, if that tool was set aside."""
    return next((entry for entry in server.set_aside_tools or [] if entry.get("name") == name), None)


def teach(session: ClientSession, name: str, input_schema: Any) -> None:
    """Let `session` mirror `name`'s `x-mcp-header` arguments into `Mcp-Param-*` headers from the
    tool's stored input schema. The SDK learns a tool's headers only from a `tools/list` on the same
    connection; a worker's connection opened after the refresh (a restart, another worker, an idle
    reconnect) has not listed, and would send the call without them, which a server that checks
    them refuses (HTTP 400). What the connection listed itself wins; an invalid schema teaches nothing."""
    maps = session._x_mcp_header_maps  # the SDK's own per-tool map (ClientSession._absorb_tool_listing fills it)
    if name in maps or not isinstance(input_schema, dict) or find_invalid_x_mcp_header(input_schema) is not None:
        return
    maps[name] = x_mcp_header_map(input_schema)
