"""The three ways an MCP request fails, and a readable cause for any exception (Django-free).

`ConnectionFailed`: the server cannot be used now (the pool reconnects next time); `CallTimeout`:
no answer in time; `RemoteError`: the server answered with a JSON-RPC error. Every message names
the server and says what a person can do; URLs are masked (their passwords and tokens never show).
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
from mcp.shared.exceptions import MCPError

from tools.mcp.url_secrets import mask as mask_url


class ConnectionFailed(Exception):
    """The server cannot be reached, did not start, died, or the connection broke.

    Connection-level: the pool drops the connection and reconnects next time. `http_status` is
    401 or 403 when the server refused our credentials (`needed_scope`: what a 403 asked for).
    """

    def __init__(self, message: str, http_status: int | None = None, needed_scope: str | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.needed_scope = needed_scope


class CallTimeout(Exception):
    """No answer within the allowed time. The connection itself may still be usable."""


class RemoteError(Exception):
    """The server answered with a JSON-RPC error (the connection is fine)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"server error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in flatten(sub)]
    return [exc]


def describe(exc: BaseException) -> str:
    """A short human-readable cause for an exception, unwrapping exception groups."""
    leaves = [e for e in flatten(exc) if not isinstance(e, anyio.get_cancelled_exc_class())] or flatten(exc)
    parts = []
    for leaf in leaves:
        if isinstance(leaf, ConnectionFailed):
            return str(leaf)
        if isinstance(leaf, httpx2.ConnectError):
            parts.append(f"cannot connect ({leaf})")
        elif isinstance(leaf, httpx2.HTTPStatusError):
            parts.append(f"HTTP {leaf.response.status_code} from {mask_url(str(leaf.request.url))}")
        elif isinstance(leaf, httpx2.TimeoutException):
            parts.append(f"HTTP timeout ({type(leaf).__name__})")
        elif isinstance(leaf, MCPError):
            parts.append(f"{leaf.error.message} (code {leaf.error.code})")
        else:
            parts.append(f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__)
    return "; ".join(dict.fromkeys(parts))
