"""One live connection to an MCP server, exposing raw wire data (Django-free).

Why this exists instead of using ``mcp.Client`` directly:

* An inspector must show what the server *sent*, not the SDK's re-serialised
  models: SDK models drop unknown fields and ``ClientSession.call_tool`` raises
  when ``structuredContent`` violates the tool's ``outputSchema``. Every method
  here returns the JSON-RPC ``result`` dict exactly as received.
* Every JSON-RPC message in either direction is reported to ``on_frame``.
* Failures become two exception types with messages a human can act on.

How raw data is obtained: the transport's read/write streams are wrapped
(``TapReader``/``TapWriter`` in tools/mcp/tap.py). Outgoing frames are the exact JSON the
transports write (``model_dump(by_alias=True, exclude_unset=True)``). Incoming
frames are the line parsed with ``json.loads`` for stdio (our own stdio transport,
tools/mcp/stdio.py, which also gives us the child's pid and stderr), and the parsed envelope for
HTTP/SSE (``result``/``params``/``error.data`` are free-form dicts there, so nested
unknown fields survive; unknown *envelope* keys next to ``jsonrpc``/``id`` would not).
A method's raw result is matched to its request by JSON-RPC id: the request id
is recorded, via a context variable, in the calling task when the SDK writes it.

Runs on asyncio only (the connection's owner task is an ``asyncio.Task``). The
owner task enters and exits the SDK client, because anyio task groups and
cancel scopes must be exited by the task that entered them; calls may come from
any task on the same loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import hashlib
import json
import logging
import math
import os
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp_types import methods as mcp_methods
from mcp_types import CONNECTION_CLOSED, LOG_LEVEL_META_KEY, REQUEST_TIMEOUT, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from mcp import Client
from mcp.client import advertise
from mcp.client.session import ClientSession
from mcp.client.auth.utils import extract_scope_from_www_auth
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from tools.mcp.stdio import InvalidFrame, RawSessionMessage, StdioProcess, StdioStartFailed, stdio_transport
from tools.mcp.tap import SERVER_REQUESTS, Capture, TappedTransport, TapWriter, current_capture, current_tag, wire_json
from tools.mcp.url_secrets import mask as mask_url
from tools.mcp.lean_http import LeanTransport, forget, kept_result
from tools.mcp.wire_result import LEAN_METHODS, WireResult


__all__ = [
    "CallTimeout",
    "Connection",
    "ConnectionFailed",
    "FrameCallback",
    "NotificationCallback",
    "RemoteError",
    "ServerConfig",
]

logger = logging.getLogger(__name__)

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

CLIENT_INFO = types.Implementation(name="mcp-inspector", version="0.1.0")
_PAGE_CAP = 100  # a paginator that never ends must not hang a listing
_CLOSE_GRACE = 8.0  # stdio shutdown is bounded by the SDK-style close-stdin/TERM/KILL sequence
# One Streamable HTTP event (the SDK's default is 1 MB): results read lean never come near it.
MAX_SSE_EVENT_BYTES = 256 * 1024 * 1024
_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


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


# ---------------------------------------------------------------------- bearer tokens

BEARER_TOKENS: dict[str, str] = {}
"""The current bearer token of each connection that takes one (``ServerConfig.bearer``), by its
``key``: tools/runtime/oauth.py stores a fresh one before each use, every HTTP request reads it."""


class _Bearer(httpx2.Auth):
    def __init__(self, key: str) -> None:
        self.key = key

    def auth_flow(self, request: httpx2.Request) -> Any:
        token = BEARER_TOKENS.get(self.key)
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


# ---------------------------------------------------------------------- Connection


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _flatten(sub)]
    return [exc]


def _describe(exc: BaseException) -> str:
    """A short human-readable cause for an exception, unwrapping exception groups."""
    leaves = [e for e in _flatten(exc) if not isinstance(e, anyio.get_cancelled_exc_class())] or _flatten(exc)
    parts = []
    for leaf in leaves:
        if isinstance(leaf, (ConnectionFailed, StdioStartFailed)):
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


class Connection:
    """A live connection to one MCP server. Create, ``await connect()``, call, ``await close()``.

    Callbacks run synchronously on the event loop (from the transport's reading
    task); they must be quick and must not block. Exceptions they raise are logged.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        on_frame: FrameCallback | None = None,
        on_notification: NotificationCallback | None = None,
        on_stderr: Callable[[str], None] | None = None,
        client_info: types.Implementation = CLIENT_INFO,
        on_server_request: ServerRequestHook | None = None,
    ) -> None:
        self.config = config
        self.on_frame = on_frame
        self.on_notification = on_notification
        self.on_stderr = on_stderr
        self.on_server_request = on_server_request
        self._incoming: dict[Any, dict[str, Any]] = {}  # raw params of server requests, by JSON-RPC id
        self._inflight: list[Any] = []  # tags of the tools/call requests now running
        self._writer: TapWriter | None = None
        self._client_info = client_info
        self._client: Client | None = None
        # The roots this server was last told of (tools/runtime/remote.py `run` announces a change).
        self.roots_version: str | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing: anyio.Event | None = None
        self._failure: BaseException | None = None
        self._connected = False
        self._closed = False
        self._eof = False
        self._stdio = StdioProcess()
        self._sent_methods: dict[Any, str] = {}
        self._captures: dict[Any, Capture] = {}
        self._lean_kept: dict[str, tuple[Any, WireResult]] = {}  # large results read lean over HTTP: token -> (request id, result)
        self._handshake: dict[str, dict[str, Any]] = {}
        self._last_invalid: InvalidFrame | None = None
        self._session_gone = False
        self._refused_auth: int | None = None  # the HTTP 401/403 that refused our credentials, if one did
        self.needed_scope: str | None = None  # the scope a 403 insufficient_scope asked for
        self._protocol_version: str | None = None
        self._sdk_snapshot: dict[str, Any] = {}  # fallback if the raw handshake was not seen
        self._task_changed: dict[str, asyncio.Event] = {}  # a task's poller, woken by notifications/tasks/status
        # The level the server is asked to log at (set_log_level changes it without reconnecting).
        self.log_level: str | None = config.log_level
        # Resource URIs this connection is subscribed to (sync_subscriptions), and why the server
        # refused the others it was asked for.
        self.subscribed: set[str] = set()
        self.subscription_errors: dict[str, str] = {}
        self._resource_listen: asyncio.Task[None] | None = None  # 2026-07-28: the listen stream of `subscribed`

    # ------------------------------------------------------------------ state

    @property
    def pid(self) -> int | None:
        """The stdio child's pid (None for HTTP/SSE or before connect)."""
        return self._stdio.pid

    @property
    def alive(self) -> bool:
        """Connected and nothing has shown the connection to be broken."""
        return (
            self._connected
            and not self._closed
            and not self._eof
            and not self._session_gone
            and self._owner is not None
            and not self._owner.done()
            and (self.config.transport != "stdio" or self._stdio.returncode is None)
        )

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the stdio server wrote to stderr."""
        return list(self._stdio.stderr_tail)

    @property
    def protocol_version(self) -> str | None:
        """The negotiated version, e.g. "2026-07-28" (discover) or "2025-11-25" (initialize)."""
        return self._protocol_version

    @property
    def is_modern(self) -> bool:
        return self._protocol_version in MODERN_PROTOCOL_VERSIONS

    def _handshake_result(self) -> dict[str, Any]:
        return self._handshake.get("server/discover" if self.is_modern else "initialize", {})

    @property
    def server_info(self) -> dict[str, Any] | None:
        """Raw ``serverInfo`` (legacy) or the discover result's ``_meta`` serverInfo stamp (2026)."""
        raw = self._handshake_result()
        if self.is_modern:
            info = (raw.get("_meta") or {}).get(types.SERVER_INFO_META_KEY)
        else:
            info = raw.get("serverInfo")
        return copy.deepcopy(info if info is not None else self._sdk_snapshot.get("serverInfo"))

    @property
    def capabilities(self) -> dict[str, Any]:
        raw = self._handshake_result().get("capabilities")
        return copy.deepcopy(raw if raw is not None else self._sdk_snapshot.get("capabilities", {}))

    @property
    def instructions(self) -> str | None:
        raw = self._handshake_result()
        if "instructions" in raw:
            return raw["instructions"]
        return self._sdk_snapshot.get("instructions")

    @property
    def handshake_result(self) -> dict[str, Any]:
        """The raw initialize (legacy) or server/discover (2026) result."""
        return copy.deepcopy(self._handshake_result())

    # ------------------------------------------------------------- tap hooks

    def _emit_frame(self, direction: str, message: dict[str, Any]) -> None:
        if self.on_frame is None:
            return
        try:
            self.on_frame(direction, message, time.time())
        except Exception:
            logger.exception("on_frame callback raised")

    def _wants_lean(self, request_id: Any) -> bool:
        """Whether a large answer to this request may be read lean (tools/mcp/wire_result.py): a tool
        result someone awaits raw, which is only stored and projected, never shown whole here."""
        return request_id in self._captures and self._sent_methods.get(request_id) in LEAN_METHODS

    def _tap_in(self, item: SessionMessage | Exception) -> None:
        if isinstance(item, Exception):
            if isinstance(item, InvalidFrame):
                self._last_invalid = item
                self._emit_frame("in", {"invalid": item.text, "reason": item.reason})
            else:
                self._emit_frame("in", {"invalid": str(item), "reason": type(item).__name__})
            return
        message = item.message
        if isinstance(item, RawSessionMessage):
            wire = item.raw
        elif isinstance(message, JSONRPCResponse):
            # The SDK keeps a response's `result` as the plain JSON object it parsed: use it as
            # is (a big result is not copied again; unknown fields are in it).
            # A large result read lean over HTTP arrives as a stand-in naming it (tools/mcp/lean_http.py).
            wire = {"jsonrpc": message.jsonrpc, "id": message.id, "result": kept_result(message.result, self._lean_kept)}
        else:
            wire = wire_json(message)
        self._emit_frame("in", wire)
        if isinstance(message, JSONRPCResponse | types.JSONRPCError):
            method = self._sent_methods.pop(message.id, None)
            capture = self._captures.pop(message.id, None)
            result = wire.get("result")
            if method in ("initialize", "server/discover") and isinstance(result, dict):
                self._handshake[method] = copy.deepcopy(result)
            if capture is not None:
                if isinstance(result, dict):
                    # Not copied: nothing mutates a frame (the log keeps a preview of large ones).
                    capture.result = result
                else:
                    capture.error = copy.deepcopy(wire.get("error"))
        elif isinstance(message, JSONRPCRequest):
            if message.method in SERVER_REQUESTS and self.on_server_request is not None:
                self._incoming[message.id] = copy.deepcopy(wire.get("params") or {})
        elif isinstance(message, JSONRPCNotification):
            if message.method == "notifications/tasks/status":
                changed = self._task_changed.get(str((wire.get("params") or {}).get("taskId")))
                if changed is not None:
                    changed.set()
            if self.on_notification is None:
                return
            try:
                self.on_notification(message.method, copy.deepcopy(wire.get("params") or {}))
            except Exception:
                logger.exception("on_notification callback raised")

    # --------------------------------------------------------- connect/close

    def _transport(self) -> Any:
        config = self.config
        if config.transport == "stdio":
            return stdio_transport(config, self._stdio, self.on_stderr, self._wants_lean)
        headers = dict(config.headers)
        if config.transport == "streamable_http":
            # read=None: response streams legitimately stay open during long calls,
            # and every request is bounded by our own per-call timeout instead.
            http = httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(
                    connect=config.connect_timeout, read=None, write=config.call_timeout, pool=config.connect_timeout
                ),
                event_hooks={"response": [self._watch_http_session]},
                transport=LeanTransport(httpx2.AsyncHTTPTransport(), self._wants_lean, self._lean_kept),
                auth=_Bearer(str(config.key)) if config.bearer else None,
            )
            # An answer read lean reaches the SDK as a small stand-in; one that is not (a lone
            # surrogate escape, a large server request) must not fail at the SDK's 1 MB event limit.
            return _owned_http(
                http, streamable_http_client(config.url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES)
            )
        return sse_client(config.url, headers=headers, timeout=config.connect_timeout, sse_read_timeout=300.0,
                          auth=_Bearer(str(config.key)) if config.bearer else None)

    async def _watch_http_session(self, response: httpx2.Response) -> None:
        """A 404 for a request carrying our session id means the server forgot the session
        (it restarted): the SDK reports that as an ordinary JSON-RPC error, we call it lost."""
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            if not self._session_gone:
                logger.info("%s answered 404 to %s %s with our session id: the session is gone",
                            self.config.name, response.request.method, response.request.url.path)
            self._session_gone = True
        if response.status_code in (401, 403):
            # The SDK turns it into "-32603 Server returned an error response"; the status matters
            # (an OAuth token the server no longer takes: tools/runtime/oauth.py asks the user to sign in again),
            # and so does the scope a 403 insufficient_scope asks for (a step-up sign-in).
            self._refused_auth = response.status_code
            self.needed_scope = extract_scope_from_www_auth(response) if response.status_code == 403 else None

    async def connect(self) -> None:
        """Open the transport and negotiate (2026-07-28 discover, falling back to initialize).

        Raises ConnectionFailed (unreachable, bad command, early exit, garbage
        instead of JSON-RPC, no answer within ``connect_timeout``).
        """
        if self._owner is not None:
            raise RuntimeError("Connection.connect() may be called only once")
        self._closing = anyio.Event()
        ready = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp-connection:{self.config.name}")
        try:
            await asyncio.shield(ready)
        except asyncio.CancelledError:
            await self.close()
            raise
        if not self._connected:
            error = self._connect_error(self._failure or TimeoutError())  # before close() changes the exit code
            await self.close()
            raise error

    def _connect_error(self, failure: BaseException) -> ConnectionFailed:
        if isinstance(failure, ConnectionFailed):
            return failure
        if isinstance(failure, StdioStartFailed):
            return ConnectionFailed(str(failure))
        name = self.config.name
        if self.config.transport == "stdio":
            where = " ".join(shlex.join([self.config.command, *self.config.args]).split())[:300]
        else:
            where = mask_url(self.config.url or "")  # the URL's password and tokens never go into an error
        if isinstance(failure, TimeoutError):
            reason = f"no answer to the MCP handshake within {self.config.connect_timeout:g}s"
        elif self._refused_auth is not None:
            reason = self._refusal()
            if self._refused_auth == 401 and not self.config.bearer and not any(k.lower() == "authorization" for k, _ in self.config.headers):
                reason += "; it may need OAuth (set Authorization to OAuth in the server's settings)"
        else:
            reason = _describe(failure)
        reason += self._stdio_context()
        return ConnectionFailed(f"{name}: could not connect to {where}: {reason}", self._refused_auth, self.needed_scope)

    def _refusal(self) -> str:
        """What the HTTP 401/403 that refused our credentials said (and the scope a 403 asked for)."""
        status = {401: "401 Unauthorized", 403: "403 Forbidden"}[self._refused_auth or 401]
        needs = f"; it needs the scope “{self.needed_scope}”" if self.needed_scope else ""
        return f"the server refused our credentials (HTTP {status}){needs}"

    def _stdio_context(self) -> str:
        """Exit code, stderr tail and invalid output: what makes a stdio failure understandable."""
        extra = ""
        if self.config.transport == "stdio":
            code = self._stdio.returncode
            if code is not None:
                extra += f"; server process exited with code {code}"
            tail = [line for line in self._stdio.stderr_tail if line.strip()][-5:]
            if tail:
                extra += "; stderr: " + " | ".join(tail)[-800:]
        if self._last_invalid is not None:
            extra += f"; server wrote non-JSON-RPC output: {self._last_invalid.text[:200]!r}"
        return extra

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """Owner task: enters the SDK client, waits for close(), exits it (same task, as anyio requires)."""
        assert self._closing is not None
        config = self.config
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + config.connect_timeout) as scope:
                async with AsyncExitStack() as stack:
                    client = Client(
                        TappedTransport(self._transport(), self),
                        mode=config.mode,
                        cache=None,
                        client_info=self._client_info,
                        extensions=[advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})],
                        # (2026-07-28: stamped on each request by _stamp_log_level, so a change needs no new Client)
                        **self._client_callbacks(),
                    )
                    await stack.enter_async_context(client)
                    self._client = client
                    self._remember_handshake(client)
                    await self._set_log_level(client)
                    async with anyio.create_task_group() as tg:
                        if self.is_modern:
                            # Wait for the listen ack so no early list_changed is missed.
                            await tg.start(self._listen, client)
                        scope.deadline = math.inf
                        self._connected = True
                        if not ready.done():
                            ready.set_result(None)
                        await self._closing.wait()
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught and not self._connected:
                self._failure = TimeoutError()
        except BaseException as exc:  # noqa: BLE001 - recorded, reported as ConnectionFailed
            self._failure = exc
            if self._connected and not self._closed:
                logger.info("connection to %s ended: %s", config.name, _describe(exc))
            if not isinstance(exc, Exception | BaseExceptionGroup | asyncio.CancelledError):
                raise
        finally:
            self._eof = True
            if not ready.done():
                ready.set_result(None)

    def _client_callbacks(self) -> dict[str, Any]:
        """The SDK callbacks for what a server asks of us; none (nothing advertised) without a hook."""
        if self.on_server_request is None:
            return {}
        return {
            "elicitation_callback": lambda ctx, params: self._answer("elicitation/create", ctx, params, types.ElicitResult),
            "sampling_callback": lambda ctx, params: self._answer(
                "sampling/createMessage", ctx, params, types.CreateMessageResult
            ),
            "list_roots_callback": lambda ctx: self._answer("roots/list", ctx, None, types.ListRootsResult),
            "logging_callback": self._log_message,
        }

    def _tag(self) -> Any:
        """The call a server request belongs to: the sender's context when the transport keeps it
        (Streamable HTTP answers on the call's own stream), else the only call in flight."""
        tag = current_tag.get()
        if tag is not None:
            return tag
        tags = list(dict.fromkeys(id(t) for t in self._inflight))
        return self._inflight[0] if len(tags) == 1 else None

    async def _answer(self, method: str, ctx: Any, params: Any, result_type: type[Any]) -> Any:
        raw = self._incoming.pop(ctx.request_id, None)
        if raw is None:
            raw = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
        assert self.on_server_request is not None
        try:
            result = await self.on_server_request(method, raw, self._tag())
        except RemoteError as exc:
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        try:
            return result_type.model_validate(result, by_name=False)
        except ValidationError as exc:
            logger.warning("our answer to %s is not valid: %s", method, exc)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"The client produced an invalid {method} result.")

    def _take_over(self, item: SessionMessage | Exception, context: contextvars.Context | None) -> bool:
        """A server request the SDK would refuse as malformed (e.g. an elicitation whose schema is
        not an object schema) is answered here instead, so the hook can store it and say why."""
        if self.on_server_request is None or isinstance(item, Exception):
            return False
        message = item.message
        if not isinstance(message, JSONRPCRequest) or message.method not in SERVER_REQUESTS:
            return False
        try:
            mcp_methods.parse_server_request(message.method, self._protocol_version or "2025-11-25", message.params)
        except ValidationError:
            tag = context.get(current_tag) if context is not None else None
            asyncio.ensure_future(self._refuse_malformed(message, tag))
            return True
        except (KeyError, ValueError):
            return False  # not a request of this version: the SDK answers method-not-found
        return False

    async def _refuse_malformed(self, message: JSONRPCRequest, tag: Any) -> None:
        params = self._incoming.pop(message.id, None) or {}
        error = types.ErrorData(code=types.INVALID_PARAMS, message=f"Invalid {message.method} params.")
        try:
            assert self.on_server_request is not None
            await self.on_server_request(message.method, params, tag if tag is not None else self._tag())
        except RemoteError as exc:
            error = types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        except Exception:
            logger.exception("on_server_request raised for a malformed %s", message.method)
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))

    async def _log_message(self, params: types.LoggingMessageNotificationParams) -> None:
        if self.on_server_request is not None:
            raw = params.model_dump(by_alias=True, mode="json", exclude_none=True)
            await self.on_server_request("notifications/message", raw, self._tag())

    async def announce_roots_changed(self) -> bool:
        """`notifications/roots/list_changed` on a legacy connection; False on 2026-07-28, which
        removed it (there a server asks for roots in each call's input requests)."""
        if self.is_modern:
            return False
        await self._session().send_roots_list_changed()
        return True

    async def _set_log_level(self, client: Client) -> None:
        """logging/setLevel on a legacy connection whose server logs (2026-07-28 opts in per request)."""
        if not self.log_level or self.is_modern or "logging" not in self.capabilities:
            return
        try:
            await client.session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level=self.log_level)), _RAW  # type: ignore[arg-type]
            )
        except MCPError as exc:
            logger.info("logging/setLevel on %s refused: %s", self.config.name, exc.error.message)

    def _stamp_log_level(self, params: Any) -> None:
        """2026-07-28 logging is opted into per request: the level rides each request's ``_meta``."""
        if self.is_modern and self.log_level and params is not None and hasattr(params, "meta"):
            params.meta = {**(params.meta or {}), LOG_LEVEL_META_KEY: self.log_level}

    async def set_log_level(self, level: str | None) -> str:
        """Change the level the server logs at, on this live connection; says how it was applied.

        2025-11-25: ``logging/setLevel`` (the server must offer ``logging``). 2026-07-28: the next
        requests carry the level in ``_meta`` (there is no setLevel). Blank on a legacy
        connection keeps the level the server has: setLevel cannot say "your default"."""
        if self.is_modern:
            self.log_level = level or None
            if not level:
                return "the next requests ask for no log messages (2026-07-28 logging is opted into per request)"
            return f"the next requests ask for {level} and above (2026-07-28: the level rides each request's _meta)"
        if not level:
            self.log_level = None
            return "kept the level the server has now (logging/setLevel has no “server default”); it applies from the next connection"
        if "logging" not in self.capabilities:
            raise ValueError(f"{self.config.name} does not offer logging (no `logging` capability), so it takes no logging/setLevel")
        await self._request(types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)))  # type: ignore[arg-type]
        self.log_level = level
        return f"logging/setLevel {level} sent on the live connection"

    @property
    def offers_subscriptions(self) -> bool:
        """The server takes resource subscriptions (``resources.subscribe``)."""
        return bool((self.capabilities.get("resources") or {}).get("subscribe"))

    async def sync_subscriptions(self, uris: set[str]) -> None:
        """Be subscribed to exactly ``uris``: ``resources/subscribe``/``unsubscribe`` on 2025-11-25,
        one ``subscriptions/listen`` stream naming them all on 2026-07-28 (opened again when the
        set changes). A URI the server refuses lands in ``subscription_errors``, not raised:
        the other URIs must not suffer for it. Updates arrive as ``notifications/resources/updated``
        through ``on_notification`` and ``on_frame``."""
        if self.is_modern:
            listening = self._resource_listen is not None and not self._resource_listen.done()
            if uris != self.subscribed or (uris and not listening):
                await self._relisten(uris)
            return
        for uri in sorted(uris - self.subscribed):
            try:
                await self._request(types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)))
            except RemoteError as exc:
                self.subscription_errors[uri] = f"the server refused resources/subscribe: {exc.message} (code {exc.code})"
                continue
            self.subscribed.add(uri)
            self.subscription_errors.pop(uri, None)
        for uri in sorted(self.subscribed - uris):
            self.subscribed.discard(uri)
            try:
                await self._request(types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)))
            except RemoteError as exc:
                logger.info("resources/unsubscribe %s refused by %s: %s", uri, self.config.name, exc.message)

    async def _relisten(self, uris: set[str]) -> None:
        old, self._resource_listen = self._resource_listen, None
        self.subscribed = set()
        if old is not None:
            old.cancel()
            await asyncio.gather(old, return_exceptions=True)
        if not uris:
            return
        ready: asyncio.Future[set[str]] = asyncio.get_running_loop().create_future()
        self._resource_listen = asyncio.create_task(self._listen_resources(sorted(uris), ready),
                                                    name=f"mcp-resource-listen:{self.config.name}")
        try:
            honored = await ready
        except Exception as exc:  # noqa: BLE001 - recorded per URI, shown to whoever subscribed
            why = f"the server refused subscriptions/listen: {_describe(exc)}"
            self.subscription_errors.update(dict.fromkeys(uris, why))
            return
        self.subscribed = honored & uris
        for uri in uris:
            if uri in honored:
                self.subscription_errors.pop(uri, None)
            else:
                self.subscription_errors[uri] = "the server left this URI out of the subscriptions/listen it acknowledged"

    async def _listen_resources(self, uris: list[str], ready: asyncio.Future[set[str]]) -> None:
        """The 2026-07-28 listen stream of the subscribed resources, held until cancelled or lost."""
        assert self._client is not None
        try:
            async with self._client.listen(resource_subscriptions=uris) as subscription:
                ready.set_result(set(subscription.honored.resource_subscriptions or ()))
                async for _event in subscription:
                    pass  # the raw notifications already went to on_notification and on_frame
        except Exception as exc:  # noqa: BLE001 - reported through `ready`, or logged once it was acknowledged
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.info("resource subscriptions/listen on %s ended: %s", self.config.name, _describe(exc))
        finally:
            if not ready.done():
                ready.set_exception(ConnectionFailed(f"{self.config.name}: the listen stream ended before it was acknowledged"))
            if self._resource_listen is asyncio.current_task():
                self.subscribed = set()  # lost: the next sync_subscriptions listens again

    def _remember_handshake(self, client: Client) -> None:
        session = client.session
        self._protocol_version = session.protocol_version
        dump = {"by_alias": True, "mode": "json", "exclude_none": True}
        if session.server_info is not None:
            self._sdk_snapshot["serverInfo"] = session.server_info.model_dump(**dump)
        if session.server_capabilities is not None:
            self._sdk_snapshot["capabilities"] = session.server_capabilities.model_dump(**dump)
        self._sdk_snapshot["instructions"] = session.instructions

    async def _listen(self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """On 2026-07-28 connections, list-changed notifications only flow on a listen stream.

        Best-effort: a server that refuses or drops the stream still works for calls.
        """
        caps = self.capabilities
        wanted = {kind: bool((caps.get(kind) or {}).get("listChanged")) for kind in ("tools", "prompts", "resources")}
        started = False
        try:
            if any(wanted.values()):
                async with client.listen(
                    tools_list_changed=wanted["tools"],
                    prompts_list_changed=wanted["prompts"],
                    resources_list_changed=wanted["resources"],
                ) as subscription:
                    task_status.started()
                    started = True
                    async for _event in subscription:
                        pass  # the raw notifications already went to on_notification
        except Exception as exc:  # noqa: BLE001 - notifications are best-effort
            logger.info("subscriptions/listen on %s ended: %s", self.config.name, _describe(exc))
        finally:
            if not started:
                task_status.started()

    async def close(self) -> None:
        """Close the session and transport; a stdio child is terminated (TERM, then KILL)."""
        self._closed = True
        if self._resource_listen is not None:
            self._resource_listen.cancel()
        if self._closing is not None:
            self._closing.set()
        owner = self._owner
        if owner is None or owner.done():
            return
        if not self._connected:
            owner.cancel()  # still handshaking: nobody is waiting for a graceful goodbye
        done, _ = await asyncio.wait({owner}, timeout=_CLOSE_GRACE)
        if not done:
            owner.cancel()
            await asyncio.wait({owner}, timeout=2.0)
        if self._stdio.process is not None and self._stdio.returncode is None:
            # Last resort: never leave a child behind.
            try:
                os.killpg(self._stdio.process.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass

    async def __aenter__(self) -> Connection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -------------------------------------------------------------- requests

    def _session(self) -> ClientSession:
        if self._client is None or not self._connected:
            raise ConnectionFailed(f"{self.config.name}: not connected")
        if not self.alive:
            raise self._lost("the connection is closed")
        return self._client.session

    def _lost(self, doing: str) -> ConnectionFailed:
        cause = ""
        if self._failure is not None and not isinstance(self._failure, asyncio.CancelledError):
            cause = f": {_describe(self._failure)}"
        return ConnectionFailed(f"{self.config.name}: connection lost while {doing}{cause}{self._stdio_context()}")

    async def _call(self, method: str, send: Callable[[], Awaitable[Any]], timeout: float) -> dict[str, Any]:
        """Run one SDK request, returning the raw result dict matched by JSON-RPC id.

        SDK validation failures are ignored when the raw result arrived: the
        inspector reports what the server sent and validates it itself.
        """
        self._session()
        self._refused_auth = self.needed_scope = None  # (a refusal is this request's, not an earlier one's)
        capture = Capture(method)
        token = current_capture.set(capture)
        try:
            with anyio.fail_after(timeout + 2.0):  # hard bound even if a transport write wedges
                try:
                    fallback = await send()
                except (ValidationError, PydanticSerializationError, RuntimeError):
                    # (A result read lean, tools/mcp/wire_result.py, holds values the SDK cannot dump.)
                    if capture.result is None:
                        raise
                    fallback = None
        except MCPError as exc:
            if exc.error.code == REQUEST_TIMEOUT:
                raise CallTimeout(
                    f"{self.config.name}: no answer to {method} within {timeout:g}s{self._stdio_context()}"
                ) from None
            if self._refused_auth is not None:
                raise ConnectionFailed(f"{self.config.name}: {self._refusal()} while waiting for {method}",
                                       self._refused_auth, self.needed_scope) from None
            if exc.error.code == CONNECTION_CLOSED or not self.alive:
                if self._session_gone:
                    raise self._lost(f"waiting for {method} (the server no longer knows our session)") from None
                raise self._lost(f"waiting for {method} ({exc.error.message})") from None
            raise RemoteError(exc.error.code, exc.error.message, exc.error.data) from None
        except TimeoutError:
            if not self.alive:
                raise self._lost(f"waiting for {method}") from None
            raise CallTimeout(f"{self.config.name}: no answer to {method} within {timeout:g}s") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise self._lost(f"sending {method}") from exc
        except Exception as exc:
            if not self.alive:
                raise self._lost(f"waiting for {method}") from exc
            raise
        finally:
            current_capture.reset(token)
            if capture.request_id is not None:
                self._captures.pop(capture.request_id, None)
                forget(self._lean_kept, capture.request_id)
        if capture.result is not None:
            return capture.result
        if isinstance(fallback, dict):
            return fallback
        return fallback.model_dump(by_alias=True, mode="json", exclude_none=True)  # type: ignore[union-attr]

    async def _request(
        self, request: Any, timeout: float | None = None, on_progress: ProgressCallback | None = None,
        max_timeout: float | None = None,
    ) -> dict[str, Any]:
        t = timeout or self.config.call_timeout
        self._stamp_log_level(request.params)
        if on_progress is not None and max_timeout is not None and max_timeout > t:
            return await self._request_reset_on_progress(request, t, max_timeout, on_progress)
        return await self._call(
            request.method,
            lambda: self._session().send_request(
                request, _RAW, request_read_timeout_seconds=t, progress_callback=on_progress
            ),
            t,
        )

    async def _request_reset_on_progress(
        self, request: Any, timeout: float, max_timeout: float, on_progress: ProgressCallback
    ) -> dict[str, Any]:
        """A request whose deadline each progress notification moves to now + ``timeout``, never
        past start + ``max_timeout`` (the spec allows the reset if a maximum holds). The SDK's own
        read timeout is the maximum; the moving deadline is a cancel scope around it, whose expiry
        makes the SDK send ``notifications/cancelled``."""
        start = anyio.current_time()
        hard = start + max_timeout
        with anyio.CancelScope(deadline=min(start + timeout, hard)) as scope:

            async def progressed(progress: float, total: float | None, message: str | None) -> None:
                scope.deadline = min(anyio.current_time() + timeout, hard)
                await on_progress(progress, total, message)

            result = await self._call(
                request.method,
                lambda: self._session().send_request(
                    request, _RAW, request_read_timeout_seconds=max_timeout, progress_callback=progressed
                ),
                max_timeout,
            )
        if scope.cancelled_caught:
            if scope.deadline >= hard:
                raise CallTimeout(
                    f"{self.config.name}: no answer to {request.method} within the hard maximum of "
                    f"{max_timeout:g} s (progress extends a call only up to it){self._stdio_context()}"
                )
            raise CallTimeout(
                f"{self.config.name}: no answer and no progress within {timeout:g} s{self._stdio_context()}"
            )
        return result

    async def _list(self, method: str, key: str, make: Callable[[str | None], Any], timeout: float | None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_PAGE_CAP):
            page = await self._call_page(method, make(cursor), timeout)
            items.extend(page.get(key) or [])
            cursor = page.get("nextCursor")
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        return items

    async def _call_page(self, method: str, request: Any, timeout: float | None) -> dict[str, Any]:
        t = timeout or self.config.call_timeout
        if method == "tools/list":
            # Through session.list_tools so the SDK learns each tool's x-mcp-header
            # map (needed for tools/call headers on 2026-07-28 HTTP).
            params = request.params
            self._stamp_log_level(params)
            return await self._call(method, lambda: self._session().list_tools(params=params), t)
        return await self._request(request, t)

    async def list_tools(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All tools, every page, as raw dicts."""
        return await self._list(
            "tools/list", "tools", lambda c: types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=c)), timeout
        )

    async def list_resources(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All resources, every page, as raw dicts."""
        return await self._list(
            "resources/list",
            "resources",
            lambda c: types.ListResourcesRequest(params=types.PaginatedRequestParams(cursor=c)),
            timeout,
        )

    async def list_resource_templates(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All resource templates, every page, as raw dicts."""
        return await self._list(
            "resources/templates/list",
            "resourceTemplates",
            lambda c: types.ListResourceTemplatesRequest(params=types.PaginatedRequestParams(cursor=c)),
            timeout,
        )

    async def list_prompts(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All prompts, every page, as raw dicts."""
        return await self._list(
            "prompts/list", "prompts", lambda c: types.ListPromptsRequest(params=types.PaginatedRequestParams(cursor=c)), timeout
        )

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        timeout: float | None = None,
        *,
        tag: Any = None,
        on_progress: ProgressCallback | None = None,
        max_timeout: float | None = None,
        input_responses: dict[str, Any] | None = None,
        request_state: str | None = None,
        task_ttl_ms: int | None = None,
    ) -> dict[str, Any]:
        """The raw ``tools/call`` result, unknown fields kept; never validated against outputSchema.

        ``on_progress`` sends a progressToken and receives the call's progress; with a
        ``max_timeout`` above ``timeout``, each progress notification gives the server ``timeout``
        again, up to ``max_timeout`` in all. ``tag`` names the call to ``on_server_request``.
        Cancelling the awaiting task sends ``notifications/cancelled``.

        On a 2026-07-28 connection the result may be ``resultType: "input_required"``: it is
        returned as it came (tools/runtime/input_rounds.py runs the rounds), and the retry passes
        ``input_responses`` and the ``request_state`` echoed verbatim.

        With ``task_ttl_ms`` (2025-11-25 tasks) the call is task-augmented: a server that takes it
        answers at once with ``{"task": {...}}`` (a CreateTaskResult), to be followed with
        ``get_task`` and ``task_result``.
        """
        extra: dict[str, Any] = {}
        if input_responses is not None or request_state is not None:
            extra.update(input_responses=input_responses, request_state=request_state)
        if task_ttl_ms is not None:
            extra["task"] = types.TaskMetadata(ttl=task_ttl_ms)
        params = types.CallToolRequestParams(name=name, arguments=arguments or {}, **extra)
        return await self._tagged(types.CallToolRequest(params=params), timeout, tag, on_progress, max_timeout)

    async def _tagged(self, request: Any, timeout: float | None, tag: Any, on_progress: ProgressCallback | None = None,
                      max_timeout: float | None = None) -> dict[str, Any]:
        """A request that server requests arriving meanwhile are attributed to (``tag``)."""
        if tag is None:
            return await self._request(request, timeout, on_progress, max_timeout)
        token = current_tag.set(tag)
        self._inflight.append(tag)
        try:
            return await self._request(request, timeout, on_progress, max_timeout)
        finally:
            self._inflight.remove(tag)
            current_tag.reset(token)

    @property
    def supports_tool_tasks(self) -> bool:
        """The server takes task-augmented ``tools/call`` (2025-11-25 ``tasks.requests.tools.call``)."""
        tasks = self.capabilities.get("tasks") or {}
        return not self.is_modern and isinstance(tasks, dict) and "call" in ((tasks.get("requests") or {}).get("tools") or {})

    async def get_task(self, task_id: str, timeout: float | None = None) -> dict[str, Any]:
        """The raw ``tasks/get`` result: the task's status, statusMessage, pollInterval…"""
        return await self._request(types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), timeout)

    async def task_result(self, task_id: str, timeout: float | None = None, *, tag: Any = None) -> dict[str, Any]:
        """The raw ``tasks/result``: the task's CallToolResult, once it has ended. A server asks for
        a task's input (elicitation, sampling) while this request is open: those requests are
        attributed to ``tag`` like a call's own."""
        request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
        return await self._tagged(request, timeout, tag)

    async def cancel_task(self, task_id: str, timeout: float | None = None) -> dict[str, Any]:
        """The raw ``tasks/cancel`` result (the task, now cancelled)."""
        return await self._request(types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)), timeout)

    async def task_changed(self, task_id: str, within: float) -> bool:
        """Wait up to ``within`` seconds for a ``notifications/tasks/status`` of the task; True if one came."""
        changed = self._task_changed.setdefault(task_id, asyncio.Event())
        try:
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), within)
            return changed.is_set()
        finally:
            changed.clear()

    def stop_following(self, task_id: str) -> None:
        """Forget a task's status notifications (its call ended)."""
        self._task_changed.pop(task_id, None)

    async def read_resource(self, uri: str, timeout: float | None = None) -> dict[str, Any]:
        """The raw ``resources/read`` result (``contents`` with ``text`` or base64 ``blob``)."""
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
        return await self._request(request, timeout)

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """The raw ``prompts/get`` result."""
        request = types.GetPromptRequest(params=types.GetPromptRequestParams(name=name, arguments=arguments))
        return await self._request(request, timeout)

    async def complete(
        self, ref: dict[str, Any], argument: str, value: str, context: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The raw ``completion/complete`` result for a prompt argument or a resource-template variable.

        ``ref`` is ``{"type": "ref/prompt", "name": ...}`` or ``{"type": "ref/resource", "uri": ...}``;
        ``context`` holds the arguments already filled in (the spec's ``context.arguments``).
        """
        params = types.CompleteRequestParams(
            ref=ref, argument=types.CompletionArgument(name=argument, value=value),
            context=types.CompletionContext(arguments=context) if context else None,
        )
        return await self._request(types.CompleteRequest(params=params), timeout)


@asynccontextmanager
async def _owned_http(http: httpx2.AsyncClient, transport: Any) -> AsyncIterator[Any]:
    """Streamable HTTP does not close an http_client it was given; this does."""
    async with http:
        async with transport as streams:
            yield streams
