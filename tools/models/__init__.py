"""MCP servers, their cached tool definitions, the JSON-RPC log, and tool calls with their two result rows.

The invariant of the product lives here: a tool call's result is stored twice, as a
`ToolResult` (the full wire result, for browsers and widgets) and a `Projection` (what the
LLM may see). Code that builds LLM requests reads only `Projection`.
"""

# One module per kind of row; every name stays importable from tools.models.
from tools.models.cached import CachedResult  # noqa: F401
from tools.models.calls import Projection, StoredJSONField, ToolCall, ToolCallQuerySet, ToolResult, embedded_ui_resource  # noqa: F401
from tools.models.frames import RpcFrame  # noqa: F401
from tools.models.requests import ServerLogMessage, ServerRequest, ServerRequestQuerySet  # noqa: F401
from tools.models.servers import (  # noqa: F401
    STDIO_STAFF_ONLY,
    LogLevel,
    OAuthFlow,
    OAuthGrant,
    Policy,
    ResourceSubscription,
    Server,
    ServerQuerySet,
    Tool,
    Transport,
    UiResource,
    app_resource_uri,
    parse_pool_key,
    pool_key,
    tool_visibility,
)
