"""What a server asks of this client (elicitation, sampling, roots) and its log messages: one table (Django-free).

The SDK's ClientSession takes one typed callback per kind (``ElicitationFnT``, ``SamplingFnT``,
``ListRootsFnT``, ``LoggingFnT``); ``KINDS`` says, per method, which callback it arrives through and
which result model our answer must validate as. A Connection with an ``on_server_request`` hook
gets every kind wired to that hook with the raw wire params (the SDK's parsed model drops unknown
fields) and the ``tag`` of the call it belongs to; tools/runtime/server_requests.py is that hook
in a worker. A new kind is one entry here plus its handler there.

Why a request that the SDK would refuse as malformed is answered here (``take_over``): the hook
stores it and says why, instead of the server hearing a bare "invalid params".
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest
from mcp_types import methods as mcp_methods
from pydantic import ValidationError

from tools.mcp.config import ServerRequestHook
from tools.mcp.errors import RemoteError
from tools.mcp.tap import current_tag

if TYPE_CHECKING:  # (the connection owns this object; imported for the annotation only)
    from tools.mcp.connection import Connection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Kind:
    method: str
    sdk_callback: str  # the ClientSession keyword it arrives through
    result: type[Any] | None  # what our answer is validated as; None: a notification (no answer)
    takes_params: bool = True


KINDS: dict[str, Kind] = {kind.method: kind for kind in (
    Kind("elicitation/create", "elicitation_callback", types.ElicitResult),
    Kind("sampling/createMessage", "sampling_callback", types.CreateMessageResult),
    Kind("roots/list", "list_roots_callback", types.ListRootsResult, takes_params=False),
    Kind("notifications/message", "logging_callback", None),
)}
REQUESTS = tuple(method for method, kind in KINDS.items() if kind.result is not None)


class ServerRequests:
    """One connection's side of server requests: the raw params seen on the wire, the calls in
    flight (to tell which one a request belongs to), and the SDK callbacks built from ``KINDS``."""

    def __init__(self, conn: Connection, hook: ServerRequestHook | None) -> None:
        self.conn = conn
        self.hook = hook
        self.incoming: dict[Any, dict[str, Any]] = {}  # raw params of server requests, by JSON-RPC id
        self.inflight: list[Any] = []  # tags of the requests now running that server requests belong to

    def remember(self, request_id: Any, method: str, params: dict[str, Any] | None) -> None:
        """A server request as it came off the wire (its raw params are what the hook gets)."""
        if method in REQUESTS and self.hook is not None:
            self.incoming[request_id] = copy.deepcopy(params or {})

    def sdk_callbacks(self) -> dict[str, Any]:
        """The SDK callbacks for what a server asks of us; none (nothing advertised) without a hook."""
        if self.hook is None:
            return {}
        callbacks: dict[str, Any] = {}
        for kind in KINDS.values():
            if kind.result is None:
                callbacks[kind.sdk_callback] = lambda params, kind=kind: self._notify(kind, params)
            elif kind.takes_params:
                callbacks[kind.sdk_callback] = lambda ctx, params, kind=kind: self._answer(kind, ctx, params)
            else:
                callbacks[kind.sdk_callback] = lambda ctx, kind=kind: self._answer(kind, ctx, None)
        return callbacks

    @contextlib.contextmanager
    def attributed(self, tag: Any) -> Iterator[None]:
        """Server requests arriving while this runs belong to ``tag`` (a call)."""
        token = current_tag.set(tag)
        self.inflight.append(tag)
        try:
            yield
        finally:
            self.inflight.remove(tag)
            current_tag.reset(token)

    def tag(self) -> Any:
        """The call a server request belongs to: the sender's context when the transport keeps it
        (Streamable HTTP answers on the call's own stream), else the only call in flight."""
        tag = current_tag.get()
        if tag is not None:
            return tag
        tags = list(dict.fromkeys(id(t) for t in self.inflight))
        return self.inflight[0] if len(tags) == 1 else None

    async def _notify(self, kind: Kind, params: Any) -> None:
        assert self.hook is not None
        await self.hook(kind.method, params.model_dump(by_alias=True, mode="json", exclude_none=True), self.tag())

    async def _answer(self, kind: Kind, ctx: Any, params: Any) -> Any:
        raw = self.incoming.pop(ctx.request_id, None)
        if raw is None:
            raw = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
        assert self.hook is not None and kind.result is not None
        try:
            result = await self.hook(kind.method, raw, self.tag())
        except RemoteError as exc:
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        try:
            return kind.result.model_validate(result, by_name=False)
        except ValidationError as exc:
            logger.warning("our answer to %s is not valid: %s", kind.method, exc)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"The client produced an invalid {kind.method} result.")

    def take_over(self, item: SessionMessage | Exception, context: contextvars.Context | None) -> bool:
        """A server request the SDK would refuse as malformed (e.g. an elicitation whose schema is
        not an object schema) is answered here instead, so the hook can store it and say why."""
        if self.hook is None or isinstance(item, Exception):
            return False
        message = item.message
        if not isinstance(message, JSONRPCRequest) or message.method not in REQUESTS:
            return False
        try:
            mcp_methods.parse_server_request(message.method, self.conn.protocol_version or "2025-11-25", message.params)
        except ValidationError:
            tag = context.get(current_tag) if context is not None else None
            asyncio.ensure_future(self._refuse_malformed(message, tag))
            return True
        except (KeyError, ValueError):
            return False  # not a request of this version: the SDK answers method-not-found
        return False

    async def _refuse_malformed(self, message: JSONRPCRequest, tag: Any) -> None:
        params = self.incoming.pop(message.id, None) or {}
        error = types.ErrorData(code=types.INVALID_PARAMS, message=f"Invalid {message.method} params.")
        try:
            assert self.hook is not None
            await self.hook(message.method, params, tag if tag is not None else self.tag())
        except RemoteError as exc:
            error = types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        except Exception:
            logger.exception("on_server_request raised for a malformed %s", message.method)
        await self.conn.send_raw(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))
