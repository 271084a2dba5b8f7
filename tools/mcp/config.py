"""What opens a connection to an MCP server, and the callbacks a connection reports through (Django-free)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter

Transport = Literal["stdio", "streamable_http", "sse"]
Mode = Literal["auto", "legacy"]
FrameCallback = Callable[[str, dict[str, Any], float], None]
"""``on_frame(direction, message, at)``: direction "in"/"out", the wire dict, ``time.time()``.

A stdio line that is not JSON-RPC is reported as ``{"invalid": <text>, "reason": <why>}``."""
NotificationCallback = Callable[[str, dict[str, Any]], None]
"""``on_notification(method, params)`` for every server notification, raw params."""
ServerRequestHook = Callable[[str, dict[str, Any], Any], Awaitable[dict[str, Any]]]
"""``await on_server_request(method, params, tag)``: what the server asks of the client.

Called for ``elicitation/create``, ``sampling/createMessage`` and ``roots/list`` (return the
result dict; raise ``RemoteError`` to answer with a JSON-RPC error) and for
``notifications/message`` (the return value is ignored). ``params`` are the raw wire params;
``tag`` is what the caller passed to ``call_tool`` for the call the request belongs to, or
None when that cannot be told (no call in flight, or several on a transport that does not say).
Setting it makes the client advertise the elicitation (form and URL), sampling and roots
capabilities."""
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
"""``await on_progress(progress, total, message)`` for a call's ``notifications/progress``."""


def _pairs(value: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else (value or ())
    return tuple(sorted((str(k), str(v)) for k, v in items))


@dataclass(frozen=True)
class ServerConfig:
    """Everything needed to open a connection; hashable and fingerprinted.

    ``key`` identifies the server record (e.g. its DB id): when a config with the
    same key but a different fingerprint shows up, the pool closes the old
    connection. ``env``/``headers`` accept a dict or pairs; they are stored as
    sorted pairs so equal settings always fingerprint the same. Their values may
    be secrets, so they are left out of ``repr``.
    """

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    cwd: str | None = None
    url: str | None = field(default="", repr=False)  # may carry a password or token
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    connect_timeout: float = 15.0
    call_timeout: float = 60.0
    mode: Mode = "auto"
    key: str | int | None = None
    # Sent as logging/setLevel after a legacy handshake, stamped on each request on 2026-07-28. Not
    # in the fingerprint: a new level is applied on the live connection (Connection.set_log_level).
    log_level: str | None = None
    # Each HTTP request carries the token BEARER_TOKENS holds for `key` (OAuth, tools/runtime/oauth.py): a
    # refreshed token is used by the next request, with no new connection.
    bearer: bool = False
    # The token is DPoP-bound (RFC 9449, tools/mcp/dpop.py): `Authorization: DPoP` and a proof signed with the
    # key dpop.PROOFERS holds for `key`, on every HTTP request.
    dpop: bool = False

    def __post_init__(self) -> None:
        if self.transport not in ("stdio", "streamable_http", "sse"):
            raise ValueError(f"unknown transport {self.transport!r}")
        if self.mode not in ("auto", "legacy"):
            raise ValueError(f"mode must be 'auto' or 'legacy', got {self.mode!r}")
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs a command")
        if self.connect_timeout <= 0 or self.call_timeout <= 0:
            raise ValueError("timeouts must be positive")
        object.__setattr__(self, "url", self.url or "")
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        object.__setattr__(self, "env", _pairs(self.env))
        object.__setattr__(self, "headers", _pairs(self.headers))
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"a {self.transport} server needs a url")

    @property
    def identity(self) -> str:
        """The server this config belongs to: ``key`` if set, else ``name``."""
        return str(self.key) if self.key is not None else self.name

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of every field but ``log_level``: equal settings, equal fingerprint."""
        fields = asdict(self)
        del fields["log_level"]
        blob = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
"""The result type given to the SDK's send_request: keep the answer as the plain JSON object it parsed."""
