"""The raw-frame tap on a client transport: every JSON-RPC frame a connection sends or
receives, as it is on the wire, for the frame log (tools/runtime/rpclog.py) and for results kept
whole (a tools/call result is captured raw, unknown fields and all, before the SDK's models
parse it). tools/mcp/connection.py wraps each transport in a TappedTransport.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import JSONRPCRequest

if TYPE_CHECKING:
    from tools.mcp.connection import Connection

@dataclass
class Capture:
    """Where a method call wants its raw result delivered (matched by request id)."""

    method: str
    request_id: Any = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


current_capture: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("mcp_raw_capture", default=None)
TRACE_HEADERS = ("traceparent", "tracestate")


def with_trace_headers(item: SessionMessage, wire: dict[str, Any]) -> SessionMessage:
    """The request with its `_meta.traceparent` (and `tracestate`), which the SDK puts there for
    the current span, also as HTTP headers: Streamable HTTP sets a message's metadata headers on
    its POST, so proxies and the server's HTTP layer see the trace too (stdio ignores them)."""
    meta = (wire.get("params") or {}).get("_meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("traceparent"), str):
        return item
    headers = {k: meta[k] for k in TRACE_HEADERS if isinstance(meta.get(k), str)}
    metadata = item.metadata
    if metadata is None:
        return replace(item, metadata=ClientMessageMetadata(headers=headers))
    if isinstance(metadata, ClientMessageMetadata):  # a copy: the SDK may hand the same metadata to other messages
        return replace(item, metadata=replace(metadata, headers={**(metadata.headers or {}), **headers}))
    return item


# The tag of the tools/call a task is running: a server request handled in that task's context
# (transports that carry the sender's context) belongs to that call.
current_tag: contextvars.ContextVar[Any] = contextvars.ContextVar("mcp_call_tag", default=None)
def wire_json(message: Any) -> dict[str, Any]:
    """The JSON object a transport writes for ``message`` (same dump as the SDK transports).

    Dumped straight to Python objects (not to a JSON string parsed again): a 40 MB result
    must not cost two more 40 MB copies in the worker."""
    return message.model_dump(mode="json", by_alias=True, exclude_unset=True)


class TapWriter:
    """Wraps the transport's write stream: reports frames and registers raw-result captures."""

    def __init__(self, inner: Any, conn: Connection) -> None:
        self._inner = inner
        self._conn = conn

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        wire = wire_json(message)
        if isinstance(message, JSONRPCRequest):
            self._conn._sent_methods[message.id] = message.method
            capture = current_capture.get()
            if capture is not None and capture.method == message.method and capture.request_id is None:
                capture.request_id = message.id
                self._conn._captures[message.id] = capture
            item = with_trace_headers(item, wire)
        self._conn._emit_frame("out", wire)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TapWriter:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)


class TapReader:
    """Wraps the transport's read stream: reports frames, notifications, raw results, EOF."""

    def __init__(self, inner: Any, conn: Connection) -> None:
        self._inner = inner
        self._conn = conn

    @property
    def last_context(self) -> contextvars.Context | None:
        # The dispatcher duck-types this to run handlers in the sender's context.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            try:
                item = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._conn._eof = True
                raise
            self._conn._tap_in(item)
            if not self._conn._take_over(item, self.last_context):
                return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> TapReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> TapReader:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)


class TappedTransport:
    """A ``mcp.client`` Transport: enters the real transport and yields tapped streams."""

    def __init__(self, inner: Any, conn: Connection) -> None:
        self._inner = inner
        self._conn = conn

    async def __aenter__(self) -> tuple[TapReader, TapWriter]:
        read_stream, write_stream = await self._inner.__aenter__()
        writer = TapWriter(write_stream, self._conn)
        self._conn._writer = writer
        return TapReader(read_stream, self._conn), writer

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)
