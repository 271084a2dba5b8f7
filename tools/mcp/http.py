"""Streamable HTTP: the transport of a remote MCP server, and what its answers say about failures (Django-free).

Beyond the SDK's transport it watches every HTTP response: a 404 to a request that carried our
session id means the server forgot the session (it restarted), which the SDK reports as an
ordinary JSON-RPC error; a 401/403 means our credentials were refused (tools/runtime/oauth.py asks
the user to sign in again, or for the scope a 403 asked for). A bearer token (OAuth) is read from
BEARER_TOKENS by each request, so a refreshed token needs no new connection; a DPoP-bound one goes
with a fresh proof (tools/mcp/dpop.py), a `use_dpop_nonce` 401 being answered there, not reported.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.auth.utils import extract_scope_from_www_auth
from mcp.client.streamable_http import streamable_http_client

from tools.mcp import dpop
from tools.mcp.config import ServerConfig
from tools.mcp.lean_http import LeanTransport
from tools.mcp.link import Link
from tools.mcp.url_secrets import mask as mask_url

logger = logging.getLogger(__name__)

# One Streamable HTTP event (the SDK's default is 1 MB): results read lean never come near it.
MAX_SSE_EVENT_BYTES = 256 * 1024 * 1024

BEARER_TOKENS: dict[str, str] = {}
"""The current bearer token of each connection that takes one (``ServerConfig.bearer``), by its
``key``: tools/runtime/oauth.py stores a fresh one before each use, every HTTP request reads it."""


class Bearer(httpx2.Auth):
    def __init__(self, key: str) -> None:
        self.key = key

    def auth_flow(self, request: httpx2.Request) -> Any:
        token = BEARER_TOKENS.get(self.key)
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


def bearer_for(config: ServerConfig) -> httpx2.Auth | None:
    """The token of an OAuth connection on each request: as a bearer token, or DPoP-bound with a proof."""
    if not config.bearer:
        return None
    key = str(config.key)
    return dpop.DPoPAuth(key, lambda: BEARER_TOKENS.get(key)) if config.dpop else Bearer(key)


class HttpLink(Link):
    """A Streamable HTTP server at ``config.url``."""

    def __init__(self, config: ServerConfig, wants_lean: Callable[[Any], bool], lean_kept: dict[str, Any]) -> None:
        super().__init__(config, wants_lean)
        self.lean_kept = lean_kept  # large results read lean: token -> (request id, result), shared with the Connection

    def open(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        config = self.config
        # read=None: response streams legitimately stay open during long calls,
        # and every request is bounded by our own per-call timeout instead.
        http = httpx2.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx2.Timeout(
                connect=config.connect_timeout, read=None, write=config.call_timeout, pool=config.connect_timeout
            ),
            event_hooks={"response": [self.watch]},
            transport=LeanTransport(httpx2.AsyncHTTPTransport(), self.wants_lean, self.lean_kept),
            auth=bearer_for(config),
        )
        # An answer read lean reaches the SDK as a small stand-in; one that is not (a lone
        # surrogate escape, a large server request) must not fail at the SDK's 1 MB event limit.
        return _owned_http(http, streamable_http_client(config.url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES))

    async def watch(self, response: httpx2.Response) -> None:
        """A 404 for a request carrying our session id means the server forgot the session
        (it restarted): the SDK reports that as an ordinary JSON-RPC error, we call it lost."""
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            if not self.session_gone:
                logger.info("%s answered 404 to %s %s with our session id: the session is gone",
                            self.config.name, response.request.method, response.request.url.path)
            self.session_gone = True
        if response.status_code in (401, 403) and not dpop.is_nonce_challenge(response):
            # The SDK turns it into "-32603 Server returned an error response"; the status matters
            # (an OAuth token the server no longer takes: tools/runtime/oauth.py asks the user to sign in again),
            # and so does the scope a 403 insufficient_scope asks for (a step-up sign-in).
            self.refused_auth = response.status_code
            self.needed_scope = extract_scope_from_www_auth(response) if response.status_code == 403 else None

    def where(self) -> str:
        return mask_url(self.config.url or "")  # the URL's password and tokens never go into an error

    def refusal_hint(self) -> str:
        config = self.config
        if self.refused_auth == 401 and not config.bearer and not any(k.lower() == "authorization" for k, _ in config.headers):
            return "; it may need OAuth (set Authorization to OAuth in the server's settings)"
        return ""


@asynccontextmanager
async def _owned_http(http: httpx2.AsyncClient, transport: Any) -> AsyncIterator[Any]:
    """Streamable HTTP does not close an http_client it was given; this does."""
    async with http:
        async with transport as streams:
            yield streams
