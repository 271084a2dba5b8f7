"""Shared command-line plumbing for the test MCP servers.

Every test server is runnable as ``python tests/mcp_servers/<file>.py
[--transport stdio|http|sse] [--port N] [--legacy] [--require-token T] [--require-basic U:P]``.
``serve()`` picks the transport; ``--legacy`` makes the server refuse the 2026-07-28
per-request protocol so clients in ``mode="auto"`` fall back to the initialize handshake.

Why ``--legacy`` is transport specific: on stdio and SSE the SDK decides the
protocol era from the client's *first* request (``serve_dual_era_loop``), so we
run the handshake-only ``serve_loop`` instead (``server/discover`` is then
answered with METHOD_NOT_FOUND). Streamable HTTP routes every request by its
``MCP-Protocol-Version`` header, so there a middleware answers ``server/discover``
with METHOD_NOT_FOUND and the client's fallback ``initialize`` reaches the
legacy path. ``--require-token``/``--require-basic`` (http) answer 401 to requests
without those credentials, like a hosted server that takes them in its URL.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
from mcp_types import METHOD_NOT_FOUND

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import serve_loop
from mcp.shared.exceptions import MCPError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--legacy", action="store_true", help="refuse the 2026-07-28 protocol (handshake only)")
    parser.add_argument("--require-token", default="", metavar="TOKEN",
                        help="http only: answer 401 unless the URL's query has token=TOKEN")
    parser.add_argument("--require-basic", default="", metavar="USER:PASSWORD",
                        help="http only: answer 401 unless the request has this HTTP Basic auth (URL userinfo)")
    return parser.parse_args(argv)


async def _refuse_discover(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: pretend ``server/discover`` does not exist (a pre-2026 server)."""
    if ctx.method == "server/discover":
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="server/discover")
    return await call_next(ctx)


def _init_options(server: MCPServer) -> Any:
    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK exposes no public accessor
    return lowlevel.create_initialization_options(
        NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
    )


async def _run_stdio(server: MCPServer, legacy: bool) -> None:
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # noqa: SLF001
    async with stdio_server() as (read_stream, write_stream):
        if legacy:
            async with lowlevel.lifespan(lowlevel) as state:
                await serve_loop(lowlevel, read_stream, write_stream, lifespan_state=state, init_options=_init_options(server))
        else:
            await lowlevel.run(read_stream, write_stream, _init_options(server))


async def _run_sse(server: MCPServer, host: str, port: int, legacy: bool) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    from mcp.server.sse import SseServerTransport

    lowlevel = server._lowlevel_server  # noqa: SLF001
    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):  # noqa: SLF001
            if legacy:
                async with lowlevel.lifespan(lowlevel) as state:
                    await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=_init_options(server))
            else:
                await lowlevel.run(read, write, _init_options(server))
        return Response()

    app = Starlette(routes=[Route("/sse", endpoint=handle_sse, methods=["GET"]), Mount("/messages/", app=sse.handle_post_message)])
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)).serve()


def _require_credentials(app: Any, token: str, basic: str) -> Any:
    """ASGI middleware: 401 for any HTTP request without the token query value or Basic auth.

    Like a real hosted server that takes its credentials in the URL (``?token=`` or
    ``user:password@``), so tests can prove the client really sends them.
    """
    import base64
    from urllib.parse import parse_qs

    expected_auth = "Basic " + base64.b64encode(basic.encode()).decode() if basic else ""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            query = parse_qs(scope.get("query_string", b"").decode())
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            if (token and query.get("token") != [token]) or (basic and headers.get("authorization") != expected_auth):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Basic")]})
                await send({"type": "http.response.body", "body": b"missing or wrong credentials"})
                return
        await app(scope, receive, send)

    return guarded


async def _run_http(server: MCPServer, host: str, port: int, legacy: bool, token: str = "", basic: str = "") -> None:
    import uvicorn

    if legacy:
        server.middleware.append(_refuse_discover)
    app = server.streamable_http_app(host=host)
    if token or basic:
        app = _require_credentials(app, token, basic)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)).serve()


def serve(server: MCPServer, argv: list[str] | None = None) -> None:
    """Run ``server`` on the transport named on the command line."""
    args = parse_args(argv)
    if args.transport == "stdio":
        anyio.run(_run_stdio, server, args.legacy)
    elif args.transport == "sse":
        anyio.run(_run_sse, server, args.host, args.port, args.legacy)
    else:
        anyio.run(_run_http, server, args.host, args.port, args.legacy, args.require_token, args.require_basic)
    sys.exit(0)
