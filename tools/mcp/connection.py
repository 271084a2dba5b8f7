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

Beside it, one module each: the transport's side (stdio.py, http.py, sse.py: each explains its
failures), server requests (server_requests.py), subscriptions, tasks, the log level, the handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.client import advertise
from mcp.client.session import ClientSession
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from tools.mcp import tool_headers
from tools.mcp.cache_hints import CacheHint, Listing
from tools.mcp.config import RAW, FrameCallback, NotificationCallback, ProgressCallback, ServerConfig, ServerRequestHook
from tools.mcp.errors import CallTimeout, ConnectionFailed, RemoteError, describe
from tools.mcp.handshake import Handshake
from tools.mcp.http import HttpLink
from tools.mcp.lean_http import forget, kept_result
from tools.mcp.link import Link
from tools.mcp.log_level import ServerLogging
from tools.mcp.server_requests import ServerRequests
from tools.mcp.sse import SseLink
from tools.mcp.stdio import InvalidFrame, RawSessionMessage, StdioLink
from tools.mcp.subscriptions import ResourceSubscriptions, listen_for_list_changes
from tools.mcp.tap import Capture, TappedTransport, TapWriter, current_capture, wire_json
from tools.mcp.tasks import Tasks
from tools.mcp.wire_result import LEAN_METHODS, WireResult

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="mcp-inspector", version="0.1.0")
_LISTS = {  # method: (the result's key, the SDK request)
    "tools/list": ("tools", types.ListToolsRequest),
    "resources/list": ("resources", types.ListResourcesRequest),
    "resources/templates/list": ("resourceTemplates", types.ListResourceTemplatesRequest),
    "prompts/list": ("prompts", types.ListPromptsRequest),
}
_PAGE_CAP = 100  # a paginator that never ends must not hang a listing
_CLOSE_GRACE = 8.0  # stdio shutdown is bounded by the SDK-style close-stdin/TERM/KILL sequence


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
        self._requests = ServerRequests(self, on_server_request)
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
        self._sent_methods: dict[Any, str] = {}
        self._captures: dict[Any, Capture] = {}
        self._lean_kept: dict[str, tuple[Any, WireResult]] = {}  # large results read lean over HTTP: token -> (request id, result)
        self.handshake = Handshake()
        self._last_invalid: InvalidFrame | None = None
        self.tasks = Tasks(self)
        self.logging = ServerLogging(self, config.log_level)
        self.subscriptions = ResourceSubscriptions(self)
        self._link = self._make_link()

    def _make_link(self) -> Link:
        """The transport's side of this connection: one module per transport explains its failures."""
        if self.config.transport == "stdio":
            return StdioLink(self.config, self._wants_lean, self.on_stderr)
        if self.config.transport == "streamable_http":
            return HttpLink(self.config, self._wants_lean, self._lean_kept)
        return SseLink(self.config, self._wants_lean, self._lean_kept)

    @property
    def pid(self) -> int | None:
        """The stdio child's pid (None for HTTP/SSE or before connect)."""
        return self._link.pid

    @property
    def alive(self) -> bool:
        """Connected and nothing has shown the connection to be broken."""
        return (self._connected and not self._closed and not self._eof and self._owner is not None
                and not self._owner.done() and self._link.alive)

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the stdio server wrote to stderr."""
        return self._link.stderr_tail

    @property
    def needed_scope(self) -> str | None:
        """The scope a 403 insufficient_scope asked for, if one did."""
        return self._link.needed_scope

    @property
    def protocol_version(self) -> str | None:
        """The negotiated version, e.g. "2026-07-28" (discover) or "2025-11-25" (initialize)."""
        return self.handshake.protocol_version

    @property
    def is_modern(self) -> bool:
        return self.handshake.is_modern

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.handshake.capabilities

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
                self.handshake.raw[method] = copy.deepcopy(result)
            if capture is not None:
                if isinstance(result, dict):
                    # Not copied: nothing mutates a frame (the log keeps a preview of large ones).
                    capture.result = result
                else:
                    capture.error = copy.deepcopy(wire.get("error"))
        elif isinstance(message, JSONRPCRequest):
            self._requests.remember(message.id, message.method, wire.get("params"))
        elif isinstance(message, JSONRPCNotification):
            if message.method == "notifications/tasks/status":
                self.tasks.status_changed(wire.get("params") or {})
            if self.on_notification is None:
                return
            try:
                self.on_notification(message.method, copy.deepcopy(wire.get("params") or {}))
            except Exception:
                logger.exception("on_notification callback raised")

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
        link = self._link
        if isinstance(failure, TimeoutError):
            reason = f"no answer to the MCP handshake within {self.config.connect_timeout:g}s"
        elif link.refused_auth is not None:
            reason = link.refusal() + link.refusal_hint()
        else:
            reason = describe(failure)
        reason += self._context()
        return ConnectionFailed(f"{self.config.name}: could not connect to {link.where()}: {reason}",
                                link.refused_auth, link.needed_scope)

    def _context(self) -> str:
        """The transport's own explanation (a child's exit code and stderr), and invalid output seen."""
        extra = self._link.context()
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
                        TappedTransport(self._link.open(), self),
                        mode=config.mode,
                        cache=None,
                        client_info=self._client_info,
                        extensions=[advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})],
                        # (2026-07-28: stamped on each request by _stamp_log_level, so a change needs no new Client)
                        **self._requests.sdk_callbacks(),
                    )
                    await stack.enter_async_context(client)
                    self._client = client
                    self.handshake.remember(client.session)
                    await self.logging.apply(client)
                    async with anyio.create_task_group() as tg:
                        if self.is_modern:
                            # Wait for the listen ack so no early list_changed is missed.
                            await tg.start(listen_for_list_changes, self, client)
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
                logger.info("connection to %s ended: %s", config.name, describe(exc))
            if not isinstance(exc, Exception | BaseExceptionGroup | asyncio.CancelledError):
                raise
        finally:
            self._eof = True
            if not ready.done():
                ready.set_result(None)

    async def send_raw(self, message: SessionMessage) -> None:
        """Write a message ourselves (an answer the SDK would not give); dropped if the transport is gone."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.send(message)

    def _take_over(self, item: SessionMessage | Exception, context: contextvars.Context | None) -> bool:
        return self._requests.take_over(item, context)

    async def announce_roots_changed(self) -> bool:
        """`notifications/roots/list_changed` on a legacy connection; False on 2026-07-28, which
        removed it (there a server asks for roots in each call's input requests)."""
        if self.is_modern:
            return False
        await self._session().send_roots_list_changed()
        return True

    async def close(self) -> None:
        """Close the session and transport; a stdio child is terminated (TERM, then KILL)."""
        self._closed = True
        self.subscriptions.stop()
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
        self._link.kill()  # last resort: never leave a child behind

    async def __aenter__(self) -> Connection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def sdk_client(self) -> Client:
        """The SDK client of this live connection (for a stream the connection itself does not hold)."""
        if self._client is None:
            raise ConnectionFailed(f"{self.config.name}: not connected")
        return self._client

    def _session(self) -> ClientSession:
        if self._client is None or not self._connected:
            raise ConnectionFailed(f"{self.config.name}: not connected")
        if not self.alive:
            raise self._lost("the connection is closed")
        return self._client.session

    def _lost(self, doing: str) -> ConnectionFailed:
        cause = ""
        if self._failure is not None and not isinstance(self._failure, asyncio.CancelledError):
            cause = f": {describe(self._failure)}"
        return ConnectionFailed(f"{self.config.name}: connection lost while {doing}{cause}{self._context()}")

    async def _call(self, method: str, send: Callable[[], Awaitable[Any]], timeout: float) -> dict[str, Any]:
        """Run one SDK request, returning the raw result dict matched by JSON-RPC id.

        SDK validation failures are ignored when the raw result arrived: the
        inspector reports what the server sent and validates it itself.
        """
        self._session()
        self._link.forget_refusal()
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
                    f"{self.config.name}: no answer to {method} within {timeout:g}s{self._context()}"
                ) from None
            if self._link.refused_auth is not None:
                raise ConnectionFailed(f"{self.config.name}: {self._link.refusal()} while waiting for {method}",
                                       self._link.refused_auth, self._link.needed_scope) from None
            if exc.error.code == CONNECTION_CLOSED or not self.alive:
                if self._link.session_gone:
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

    async def request(
        self, request: Any, timeout: float | None = None, on_progress: ProgressCallback | None = None,
        max_timeout: float | None = None,
    ) -> dict[str, Any]:
        """One request (an SDK request model), answered with the raw result dict as the server sent it."""
        t = timeout or self.config.call_timeout
        self.logging.stamp(request.params)
        if on_progress is not None and max_timeout is not None and max_timeout > t:
            return await self._request_reset_on_progress(request, t, max_timeout, on_progress)
        return await self._call(
            request.method,
            lambda: self._session().send_request(
                request, RAW, request_read_timeout_seconds=t, progress_callback=on_progress
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
                    request, RAW, request_read_timeout_seconds=max_timeout, progress_callback=progressed
                ),
                max_timeout,
            )
        if scope.cancelled_caught:
            if scope.deadline >= hard:
                raise CallTimeout(
                    f"{self.config.name}: no answer to {request.method} within the hard maximum of "
                    f"{max_timeout:g} s (progress extends a call only up to it){self._context()}"
                )
            raise CallTimeout(
                f"{self.config.name}: no answer and no progress within {timeout:g} s{self._context()}"
            )
        return result

    async def _listing(self, method: str, key: str, make: Callable[[str | None], Any], timeout: float | None) -> Listing:
        items: list[dict[str, Any]] = []
        hint: CacheHint | None = None
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_PAGE_CAP):
            page = await self._call_page(method, make(cursor), timeout)
            items.extend(page.get(key) or [])
            hint = CacheHint.of(page) if hint is None else hint.combine(CacheHint.of(page))
            cursor = page.get("nextCursor")
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        return Listing(items, hint or CacheHint())

    async def listing(self, method: str, timeout: float | None = None) -> Listing:
        """Every item of `tools/list`, `resources/list`, `resources/templates/list` or `prompts/list`,
        with the list's cache hint (tools/mcp/cache_hints.py)."""
        key, request = _LISTS[method]
        return await self._listing(method, key, lambda c: request(params=types.PaginatedRequestParams(cursor=c)), timeout)

    async def _call_page(self, method: str, request: Any, timeout: float | None) -> dict[str, Any]:
        t = timeout or self.config.call_timeout
        if method == "tools/list":
            # Through session.list_tools so the SDK learns each tool's x-mcp-header
            # map (needed for tools/call headers on 2026-07-28 HTTP).
            params = request.params
            self.logging.stamp(params)
            return await self._call(method, lambda: self._session().list_tools(params=params), t)
        return await self.request(request, t)

    async def list_tools(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All tools, every page, as raw dicts."""
        return (await self.listing("tools/list", timeout)).items

    async def list_resources(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All resources, every page, as raw dicts."""
        return (await self.listing("resources/list", timeout)).items

    async def list_resource_templates(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All resource templates, every page, as raw dicts."""
        return (await self.listing("resources/templates/list", timeout)).items

    async def list_prompts(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """All prompts, every page, as raw dicts."""
        return (await self.listing("prompts/list", timeout)).items

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
        input_schema: dict[str, Any] | None = None,
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
        ``tasks.get`` and ``tasks.result``.

        ``input_schema`` (the tool's stored one) lets a 2026-07-28 connection that has not listed the
        tool still send its ``x-mcp-header`` arguments as ``Mcp-Param-*`` headers (tools/mcp/tool_headers.py).
        """
        if input_schema is not None and self.is_modern:
            tool_headers.teach(self._session(), name, input_schema)
        extra: dict[str, Any] = {}
        if input_responses is not None or request_state is not None:
            extra.update(input_responses=input_responses, request_state=request_state)
        if task_ttl_ms is not None:
            extra["task"] = types.TaskMetadata(ttl=task_ttl_ms)
        params = types.CallToolRequestParams(name=name, arguments=arguments or {}, **extra)
        return await self.tagged(types.CallToolRequest(params=params), timeout, tag, on_progress, max_timeout)

    async def tagged(self, request: Any, timeout: float | None, tag: Any, on_progress: ProgressCallback | None = None,
                      max_timeout: float | None = None) -> dict[str, Any]:
        """A request that server requests arriving meanwhile are attributed to (``tag``)."""
        if tag is None:
            return await self.request(request, timeout, on_progress, max_timeout)
        with self._requests.attributed(tag):
            return await self.request(request, timeout, on_progress, max_timeout)

    async def read_resource(self, uri: str, timeout: float | None = None) -> dict[str, Any]:
        """The raw ``resources/read`` result (``contents`` with ``text`` or base64 ``blob``)."""
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
        return await self.request(request, timeout)

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """The raw ``prompts/get`` result."""
        request = types.GetPromptRequest(params=types.GetPromptRequestParams(name=name, arguments=arguments))
        return await self.request(request, timeout)

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
        return await self.request(types.CompleteRequest(params=params), timeout)
