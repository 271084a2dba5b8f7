"""How the `mcp` SDK's HTTP client transports parse a JSON-RPC message: json.loads first.

The SDK's Streamable HTTP and SSE clients parse each message with pydantic-core's
`validate_json`. For a result of many small objects that path is very costly: a 40 MB
`structuredContent` of ~870,000 rows took 8.2 s and 1.5 GB of RSS, still held after the
call, where `json.loads` and then `validate_python` on the same bytes took 1.2 s and 271 MB
(measured with the basic test server's `big_structured`, bench/big_results.py). The stdio
transport here already parses that way (tools/mcp/stdio.py `parse_line`).

`install()` gives those two SDK modules an adapter that does the same. It validates
exactly what the SDK's adapter validates; anything json.loads refuses goes to the SDK's own
`validate_json`, so malformed input raises the pydantic `ValidationError` the SDK handles.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.client.sse
import mcp.client.streamable_http
from pydantic import TypeAdapter


class LoadsThenValidate:
    """A stand-in for the SDK's `jsonrpc_message_adapter` with a cheaper `validate_json`."""

    def __init__(self, inner: TypeAdapter) -> None:
        self.inner = inner

    def validate_json(self, data: str | bytes | bytearray, /, **kwargs: Any) -> Any:
        try:
            value = json.loads(data)
        except ValueError:
            return self.inner.validate_json(data, **kwargs)
        return self.inner.validate_python(value, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def install() -> None:
    """Idempotent: used by the client transports of this process only."""
    http = mcp.client.streamable_http
    if not isinstance(http.jsonrpc_message_adapter, LoadsThenValidate):
        http.jsonrpc_message_adapter = LoadsThenValidate(http.jsonrpc_message_adapter)
    # sse.py reaches the adapter through the `mcp_types` module it imports as `types`;
    # give that module name its own namespace rather than changing `mcp_types` for everyone.
    sse_types = mcp.client.sse.types
    if not isinstance(getattr(sse_types, "jsonrpc_message_adapter", None), LoadsThenValidate):
        mcp.client.sse.types = _TypesWithFastAdapter(sse_types)


class _TypesWithFastAdapter:
    """`mcp_types` as sse.py sees it, with the cheaper adapter."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self.jsonrpc_message_adapter = LoadsThenValidate(module.jsonrpc_message_adapter)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)
