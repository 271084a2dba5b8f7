"""Large tool results over Streamable HTTP read lean, as over stdio (tools/mcp/wire_result.py).

The SDK's HTTP client parses every message it receives into Python objects before anyone sees
it: a 52 MB structuredContent became 870,000 dicts in the worker. So the inspector's HTTP client
gets a transport that looks at the bytes first. A large JSON-RPC answer that the connection
wants lean (a JSON body, or one SSE `data:` line) is read lean and kept by the connection under a
token; the SDK gets a small stand-in result naming that token, and the tap
(tools/mcp/connection.py `_tap_in`) swaps the lean result back in. Everything else, and any body
that is not plain JSON (compressed, split over several `data:` lines), passes through untouched.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

from tools.mcp.wire_result import LARGE_BYTES, WireResult, lean_envelope

STAND_IN_KEY = "io.github.mcp-inspector/lean-result"
_EOL = re.compile(rb"\r\n|\r|\n")


class LeanTransport(httpx2.AsyncBaseTransport):
    """Wraps the HTTP transport of one connection: `wanted(request id)` says which answers may
    be read lean, `kept` receives them by token."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, wanted: Callable[[Any], bool],
                 kept: dict[str, tuple[Any, WireResult]]) -> None:
        self.inner, self.wanted, self.kept = inner, wanted, kept

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if request.method != "POST" or response.headers.get("content-encoding", "identity") != "identity":
            return response
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            stream: Any = _SseBody(response.stream, self._stand_in)
        elif kind == "application/json" and int(response.headers.get("content-length") or LARGE_BYTES) >= LARGE_BYTES:
            stream = _JsonBody(response.stream, self._stand_in)
        else:
            return response
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]
        return httpx2.Response(response.status_code, headers=headers, stream=stream, extensions=response.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _stand_in(self, frame: Any) -> bytes | None:
        """The small message the SDK gets instead of a large answer read lean; None if `frame`
        is anything else."""
        found = lean_envelope(frame, self.wanted)
        if found is None:
            return None
        request_id, result = found
        token = secrets.token_hex(8)
        self.kept[token] = (request_id, result)  # until the tap takes it, or the request ends (forget())
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": [], STAND_IN_KEY: token}}).encode()


def kept_result(result: Any, kept: dict[str, tuple[Any, WireResult]]) -> Any:
    """The lean result a stand-in names (taken from `kept`), or `result` itself."""
    token = result.get(STAND_IN_KEY) if isinstance(result, dict) else None
    found = kept.pop(token, None) if isinstance(token, str) else None
    return found[1] if found is not None else result


def forget(kept: dict[str, tuple[Any, WireResult]], request_id: Any) -> None:
    """Drop what was kept for a request that has ended: a stand-in the SDK never delivered (an
    event of another type, a stream cut before the event ended, an error status) must not keep
    its result for the life of the connection."""
    for token in [token for token, (kept_id, _) in kept.items() if kept_id == request_id]:
        kept.pop(token, None)


class _JsonBody(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, stand_in: Callable[[Any], bytes | None]) -> None:
        self.inner, self.stand_in = inner, stand_in

    async def __aiter__(self) -> AsyncIterator[bytes]:
        body = bytearray()  # grown in place: one copy of the body, whatever its size
        async for chunk in self.inner:
            body += chunk
        yield self.stand_in(body) or body

    async def aclose(self) -> None:
        await self.inner.aclose()


class _SseBody(httpx2.AsyncByteStream):
    """Passes an event stream on line by line, as soon as each line is complete (progress and
    server requests must not wait), a large `data:` line replaced by its stand-in."""

    def __init__(self, inner: Any, stand_in: Callable[[Any], bytes | None]) -> None:
        self.inner, self.stand_in = inner, stand_in

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # A line ends at CRLF, LF or CR (the SSE grammar). The bytes are passed on unchanged, so
        # a CR ending one chunk and its LF starting the next need no care: the LF goes on alone.
        line = bytearray()
        async for chunk in self.inner:
            start = 0
            while (found := _EOL.search(chunk, start)) is not None:
                line += memoryview(chunk)[start:found.end()]
                start = found.end()
                done, line = line, bytearray()
                yield self._line(done)
                done = None
            line += memoryview(chunk)[start:]
        if line:
            yield line

    def _line(self, line: bytearray) -> Any:
        if len(line) < LARGE_BYTES or not line.startswith(b"data:"):
            return line
        start = 6 if line[5:6] == b" " else 5
        end = len(line) - (2 if line.endswith(b"\r\n") else 1 if line.endswith((b"\n", b"\r")) else 0)
        small = self.stand_in(memoryview(line)[start:end])
        return b"data: " + small + bytes(line[end:]) if small is not None else line

    async def aclose(self) -> None:
        await self.inner.aclose()
