"""What a Connection needs of its transport, whatever the transport: open it, tell whether it
still holds, say where it goes and why it failed (Django-free).

One subclass per transport, in its own module: tools/mcp/stdio.py (a child process),
tools/mcp/http.py (Streamable HTTP), tools/mcp/sse.py (legacy HTTP+SSE). Each explains its own
failures, so tools/mcp/connection.py never branches on the transport.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from tools.mcp.config import ServerConfig


class Link:
    """One transport's side of a connection. The defaults fit a transport with no process and
    no HTTP status to remember."""

    def __init__(self, config: ServerConfig, wants_lean: Callable[[Any], bool]) -> None:
        self.config = config
        self.wants_lean = wants_lean  # (request id) -> may a large answer to it be read lean
        # The HTTP 401/403 that refused our credentials (and the scope a 403 asked for), if one did.
        self.refused_auth: int | None = None
        self.needed_scope: str | None = None
        self.session_gone = False  # the server forgot our session (it restarted)

    def open(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        """The SDK transport: an async context manager yielding its (read, write) streams."""
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        return not self.session_gone

    @property
    def pid(self) -> int | None:
        return None

    @property
    def stderr_tail(self) -> list[str]:
        return []

    def where(self) -> str:
        """Where the connection goes, for error messages (no secrets)."""
        raise NotImplementedError

    def context(self) -> str:
        """What makes a failure understandable beyond the exception (exit code, stderr), or ""."""
        return ""

    def forget_refusal(self) -> None:
        """A refusal belongs to the request it answered, not to the next one."""
        self.refused_auth = self.needed_scope = None

    def refusal(self) -> str:
        """What the HTTP 401/403 that refused our credentials said (and the scope a 403 asked for)."""
        status = {401: "401 Unauthorized", 403: "403 Forbidden"}[self.refused_auth or 401]
        needs = f"; it needs the scope “{self.needed_scope}”" if self.needed_scope else ""
        return f"the server refused our credentials (HTTP {status}){needs}"

    def refusal_hint(self) -> str:
        """What to try when a refusal stopped the handshake, or ""."""
        return ""

    def kill(self) -> None:
        """Last resort after close(): leave nothing running."""
