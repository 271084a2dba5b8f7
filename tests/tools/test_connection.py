"""tools.mcp.connection against real MCP servers over stdio, Streamable HTTP and SSE.

No Django: run with ``python -m pytest tests/tools/test_connection.py -p no:django``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.mcp_servers.launch import ServerProcess, free_port, pid_alive, server_path, start_server, wait_pid_gone  # noqa: E402
from tools.mcp.config import ServerConfig  # noqa: E402
from tools.mcp.connection import Connection  # noqa: E402
from tools.mcp.errors import CallTimeout, ConnectionFailed, RemoteError  # noqa: E402

# Every test here starts real MCP servers or workers of its own.
pytestmark = pytest.mark.worker

T = TypeVar("T")
TRANSPORTS = ["stdio", "streamable_http", "sse"]
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ServerProcess]]:
    """Long-lived basic servers (modern and --legacy) for the network transports."""
    started = {
        "http": start_server("basic.py", "http"),
        "sse": start_server("basic.py", "sse"),
        "http-legacy": start_server("basic.py", "http", "--legacy"),
        "sse-legacy": start_server("basic.py", "sse", "--legacy"),
    }
    try:
        yield started
    finally:
        for server in started.values():
            server.stop()


def make_config(
    transport: str,
    servers: dict[str, ServerProcess] | None = None,
    *,
    legacy_server: bool = False,
    script: str = "basic.py",
    url: str | None = None,
    **overrides: Any,
) -> ServerConfig:
    options: dict[str, Any] = {"connect_timeout": 10.0, "call_timeout": 10.0, **overrides}
    if transport == "stdio":
        args = [server_path(script)] + (["--legacy"] if legacy_server else [])
        return ServerConfig(name=f"{script}-stdio", transport="stdio", command=sys.executable, args=tuple(args), **options)
    if url is None:
        assert servers is not None
        short = "http" if transport == "streamable_http" else "sse"
        url = servers[short + ("-legacy" if legacy_server else "")].url
    return ServerConfig(name=f"{script}-{transport}", transport=transport, url=url, **options)  # type: ignore[arg-type]


async def with_connection(config: ServerConfig, fn: Callable[[Connection], Awaitable[T]], **kwargs: Any) -> T:
    async with Connection(config, **kwargs) as conn:
        return await fn(conn)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []) if block.get("type") == "text")


async def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


# --------------------------------------------------------------------- basics


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_list_and_call_everything(transport: str, servers: dict[str, ServerProcess]) -> None:
    async def scenario(conn: Connection) -> None:
        assert conn.protocol_version == MODERN
        assert conn.handshake.server_info == {"name": "basic-test-server", "version": "1.0.0"}
        assert conn.handshake.instructions == "A test server for the MCP inspector."
        assert "tools" in conn.capabilities

        tools = {tool["name"]: tool for tool in await conn.list_tools()}
        assert {"echo", "add", "whoami", "slow", "crash", "bad_output", "unknown_fields", "add_tool_now"} <= set(tools)
        assert tools["add"]["outputSchema"]["properties"]["sum"]["type"] == "integer"

        echo = await conn.call_tool("echo", {"text": "hello there"})
        assert echo["content"] == [{"type": "text", "text": "hello there"}]
        assert echo["isError"] is False

        added = await conn.call_tool("add", {"a": 2, "b": 40})
        assert added["structuredContent"] == {"sum": 42}
        assert '"sum": 42' in text_of(added)

        resources = {r["uri"]: r for r in await conn.list_resources()}
        assert set(resources) == {"text://hello", "data://config.json", "image://pixel.png"}
        templates = await conn.list_resource_templates()
        assert [t["uriTemplate"] for t in templates] == ["greeting://{name}"]

        text = await conn.read_resource("text://hello")
        assert text["contents"][0]["text"] == "hello world"
        data = await conn.read_resource("data://config.json")
        assert data["contents"][0]["mimeType"] == "application/json"
        assert '"answer": 42' in data["contents"][0]["text"]
        png = await conn.read_resource("image://pixel.png")
        assert png["contents"][0]["mimeType"] == "image/png"
        assert base64.b64decode(png["contents"][0]["blob"]).startswith(b"\x89PNG\r\n\x1a\n")
        greeting = await conn.read_resource("greeting://Ada")
        assert greeting["contents"][0]["text"] == "Hello, Ada!"

        prompts = await conn.list_prompts()
        assert [p["name"] for p in prompts] == ["greet"]
        assert {a["name"] for a in prompts[0]["arguments"]} == {"name", "style"}
        prompt = await conn.get_prompt("greet", {"name": "Bob", "style": "formal"})
        assert prompt["messages"][0]["content"]["text"] == "Please greet Bob in a formal way."

    run(with_connection(make_config(transport, servers), scenario))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_raw_result_keeps_unknown_fields(transport: str, servers: dict[str, ServerProcess]) -> None:
    result = run(with_connection(make_config(transport, servers), lambda c: c.call_tool("unknown_fields")))
    assert result["x-extra"] == {"keep": "me"}
    assert text_of(result) == "has extra fields"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_output_schema_violation_is_returned_not_raised(transport: str, servers: dict[str, ServerProcess]) -> None:
    async def scenario(conn: Connection) -> dict[str, Any]:
        await conn.list_tools()  # the SDK would now know the outputSchema and validate against it
        return await conn.call_tool("bad_output")

    result = run(with_connection(make_config(transport, servers), scenario))
    assert result["structuredContent"] == {"count": "not-a-number"}
    assert result["isError"] is False


def test_sdk_itself_would_raise_on_bad_output() -> None:
    """Guards the test above: the plain SDK client really does raise for this tool."""
    from mcp import Client, StdioServerParameters

    async def scenario() -> None:
        params = StdioServerParameters(command=sys.executable, args=[server_path("basic.py")])
        async with Client(params, cache=None) as client:
            with pytest.raises(RuntimeError, match="Invalid structured content"):
                await client.call_tool("bad_output", {})

    run(scenario())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_frames_recorded_in_both_directions(transport: str, servers: dict[str, ServerProcess]) -> None:
    frames: list[tuple[str, dict[str, Any], float]] = []

    async def scenario(conn: Connection) -> None:
        await conn.call_tool("echo", {"text": "framed"})
        await conn.call_tool("unknown_fields")

    before = time.time()
    run(with_connection(make_config(transport, servers), scenario, on_frame=lambda d, m, at: frames.append((d, m, at))))
    assert {d for d, _, _ in frames} == {"in", "out"}
    assert all(before <= at <= time.time() for _, _, at in frames)
    assert frames[0][0] == "out" and frames[0][1]["method"] == "server/discover"

    calls = [m for d, m, _ in frames if d == "out" and m.get("method") == "tools/call"]
    echo_request = next(m for m in calls if m["params"]["name"] == "echo")
    assert echo_request["jsonrpc"] == "2.0"
    assert echo_request["params"]["arguments"] == {"text": "framed"}
    echo_response = next(m for d, m, _ in frames if d == "in" and m.get("id") == echo_request["id"] and "result" in m)
    assert echo_response["result"]["content"][0]["text"] == "framed"

    extra_request = next(m for m in calls if m["params"]["name"] == "unknown_fields")
    extra_response = next(m for d, m, _ in frames if d == "in" and m.get("id") == extra_request["id"])
    assert extra_response["result"]["x-extra"] == {"keep": "me"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_slow_call_times_out_and_connection_survives(transport: str, servers: dict[str, ServerProcess]) -> None:
    async def scenario(conn: Connection) -> None:
        started = time.monotonic()
        with pytest.raises(CallTimeout, match=r"no answer to tools/call within 0\.5s"):
            await conn.call_tool("slow", {"seconds": 5}, timeout=0.5)
        assert time.monotonic() - started < 3.0
        assert conn.alive
        assert text_of(await conn.call_tool("echo", {"text": "still here"})) == "still here"

    run(with_connection(make_config(transport, servers), scenario))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_errors_do_not_break_the_connection(transport: str, servers: dict[str, ServerProcess]) -> None:
    async def scenario(conn: Connection) -> None:
        with pytest.raises(RemoteError) as info:
            await conn.read_resource("nope://missing")
        assert info.value.code != 0 and "nope://missing" in str(info.value.as_dict())
        unknown = await conn.call_tool("no_such_tool")
        assert unknown["isError"] is True and "no_such_tool" in text_of(unknown)
        assert conn.alive
        assert text_of(await conn.call_tool("echo", {"text": "fine"})) == "fine"

    run(with_connection(make_config(transport, servers), scenario))


# ------------------------------------------------------------------ protocols


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("mode", "legacy_server", "expected"),
    [("auto", False, MODERN), ("legacy", False, LEGACY), ("auto", True, LEGACY)],
    ids=["auto-modern", "forced-legacy", "legacy-server"],
)
def test_protocol_negotiation(
    transport: str, mode: str, legacy_server: bool, expected: str, servers: dict[str, ServerProcess]
) -> None:
    frames: list[dict[str, Any]] = []

    async def scenario(conn: Connection) -> tuple[str | None, dict[str, Any] | None, str]:
        result = await conn.call_tool("echo", {"text": "v"})
        return conn.protocol_version, conn.handshake.server_info, text_of(result)

    config = make_config(transport, servers, legacy_server=legacy_server, mode=mode)
    version, info, echoed = run(with_connection(config, scenario, on_frame=lambda d, m, at: frames.append(m)))
    assert version == expected
    assert info is not None and info["name"] == "basic-test-server"
    assert echoed == "v"
    methods = [m.get("method") for m in frames]
    assert ("initialize" in methods) == (expected == LEGACY)
    # MCP Apps support is advertised whichever handshake is used.
    first = next(m for m in frames if m.get("method") in ("server/discover", "initialize"))
    caps = first["params"].get("capabilities") or first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert caps["extensions"]["io.modelcontextprotocol/ui"] == {"mimeTypes": ["text/html;profile=mcp-app"]}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("legacy_server", [False, True], ids=["modern", "legacy"])
def test_tools_list_changed_notification(transport: str, legacy_server: bool, servers: dict[str, ServerProcess]) -> None:
    notes: list[tuple[str, dict[str, Any]]] = []

    async def scenario(conn: Connection) -> list[str]:
        await conn.call_tool("add_tool_now")
        assert await wait_for(lambda: any(m == "notifications/tools/list_changed" for m, _ in notes))
        return [tool["name"] for tool in await conn.list_tools()]

    config = make_config(transport, servers, legacy_server=legacy_server)
    names = run(with_connection(config, scenario, on_notification=lambda m, p: notes.append((m, p))))
    assert any(name.startswith("dynamic_") for name in names)


def test_app_server_result_markers_and_visibility() -> None:
    async def scenario(conn: Connection) -> None:
        tools = {tool["name"]: tool for tool in await conn.list_tools()}
        assert tools["show_marker"]["_meta"]["ui"] == {"resourceUri": "ui://app/marker.html", "visibility": ["model", "app"]}
        assert tools["app_only_increment"]["_meta"]["ui"]["visibility"] == ["app"]
        assert tools["model_only"]["_meta"]["ui"]["visibility"] == ["model"]
        result = await conn.call_tool("show_marker", {"label": "x1"})
        assert text_of(result) == "CONTENT-MARKER-x1"
        assert result["structuredContent"]["secret"] == "STRUCTURED-MARKER-x1"
        assert result["_meta"]["note"] == "META-MARKER-x1"
        view = await conn.read_resource("ui://app/marker.html")
        content = view["contents"][0]
        assert content["mimeType"] == "text/html;profile=mcp-app"
        for needle in ('"ui/initialize"', '"ui/notifications/initialized"', '"ui/notifications/tool-result"',
                       '"ui/update-model-context"', '"ui/message"', '"ui/notifications/size-changed"', 'id="secret"'):
            assert needle in content["text"]
        assert conn.capabilities["extensions"] == {"io.modelcontextprotocol/ui": {}}

    run(with_connection(make_config("stdio", script="app.py"), scenario))


# --------------------------------------------------------------------- stdio


def test_stdio_pid_is_the_server_and_close_terminates_it() -> None:
    async def scenario() -> int:
        conn = Connection(make_config("stdio"))
        await conn.connect()
        pid = conn.pid
        assert pid is not None
        assert text_of(await conn.call_tool("whoami")) == str(pid)
        await conn.close()
        assert not conn.alive
        return pid

    pid = run(scenario())
    assert wait_pid_gone(pid, 5.0), "the stdio server survived close()"


def test_stdio_close_kills_a_server_that_ignores_stdin_eof(tmp_path: Path) -> None:
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(
        "import signal, sys, runpy\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.argv = [sys.argv[1]]\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "finally:\n    import time\n    while True: time.sleep(1)\n"
    )
    config = ServerConfig(name="stubborn", transport="stdio", command=sys.executable,
                          args=(str(stubborn), server_path("basic.py")), connect_timeout=10)

    async def scenario() -> tuple[int, float]:
        conn = Connection(config)
        await conn.connect()
        assert conn.pid is not None
        started = time.monotonic()
        await conn.close()
        return conn.pid, time.monotonic() - started

    pid, took = run(scenario())
    assert wait_pid_gone(pid, 5.0), "SIGKILL escalation did not happen"
    assert took < 10.0


def test_stdio_crash_mid_call_is_a_clear_connection_failure() -> None:
    async def scenario(conn: Connection) -> None:
        with pytest.raises(ConnectionFailed) as info:
            await conn.call_tool("crash")
        message = str(info.value)
        assert "basic.py-stdio" in message and "tools/call" in message
        assert "exited with code 3" in message
        assert not conn.alive
        with pytest.raises(ConnectionFailed):
            await conn.call_tool("echo", {"text": "anyone?"})

    run(with_connection(make_config("stdio"), scenario))


def test_a_killed_stdio_server_is_not_alive_before_the_event_loop_hears_of_it() -> None:
    """The pool asks `alive` before each call: a server killed a moment ago must not get the next
    call (it failed "connection lost" where a new server would have answered)."""
    async def scenario(conn: Connection) -> None:
        assert conn.alive
        pid = conn.pid
        os.kill(pid, signal.SIGKILL)
        # Without yielding to the event loop: it has not seen the exit or the end of stdout yet.
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert not pid_alive(pid)
        assert not conn.alive

    run(with_connection(make_config("stdio"), scenario))


def test_wrong_command_fails_fast() -> None:
    config = ServerConfig(name="bad", transport="stdio", command="/nonexistent/mcp-server-xyz", connect_timeout=5)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match=r"bad: could not start '/nonexistent/mcp-server-xyz': No such file"):
        run(Connection(config).connect())
    assert time.monotonic() - started < 2.0


def test_server_that_exits_at_startup_reports_exit_code_and_stderr() -> None:
    config = ServerConfig(name="oops", transport="stdio", command=sys.executable,
                          args=("/nonexistent/server.py",), connect_timeout=5)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as info:
        run(Connection(config).connect())
    assert time.monotonic() - started < 4.0
    message = str(info.value)
    assert "exited with code 2" in message
    assert "can't open file" in message


def test_server_that_never_answers_times_out() -> None:
    silent = "import sys\nfor _ in sys.stdin:\n    pass\n"
    config = ServerConfig(name="silent", transport="stdio", command=sys.executable, args=("-c", silent),
                          connect_timeout=1.5)
    pids: list[int] = []

    async def scenario() -> None:
        conn = Connection(config)
        try:
            await conn.connect()
        finally:
            if conn.pid:
                pids.append(conn.pid)

    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match=r"silent: .*no answer to the MCP handshake within 1\.5s"):
        run(scenario())
    assert time.monotonic() - started < 6.0
    assert pids and wait_pid_gone(pids[0], 5.0)


def test_server_that_sends_garbage() -> None:
    noisy = "import sys\nfor line in sys.stdin:\n    print('this is not json', flush=True)\n"
    config = ServerConfig(name="noisy", transport="stdio", command=sys.executable, args=("-c", noisy),
                          connect_timeout=1.5)
    frames: list[dict[str, Any]] = []
    with pytest.raises(ConnectionFailed, match=r"non-JSON-RPC output: 'this is not json'"):
        run(Connection(config, on_frame=lambda d, m, at: frames.append(m)).connect())
    invalid = [m for m in frames if "invalid" in m]
    assert invalid and invalid[0]["invalid"] == "this is not json" and "not JSON" in invalid[0]["reason"]


# ------------------------------------------------------------------- network


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_unreachable_url_fails_within_timeout(transport: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/{'mcp' if transport == 'streamable_http' else 'sse'}"
    config = make_config(transport, url=url, connect_timeout=3)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as info:
        run(Connection(config).connect())
    assert time.monotonic() - started < 3.5
    message = str(info.value)
    assert url in message and "cannot connect" in message


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_http_server_that_never_answers_times_out(transport: str) -> None:
    with socket.socket() as listener:  # accepts TCP (backlog) but never speaks HTTP
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        config = make_config(transport, url=url, connect_timeout=1.5)
        started = time.monotonic()
        with pytest.raises(ConnectionFailed, match="within 1.5s"):
            run(Connection(config).connect())
        assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_network_server_crash_mid_call(transport: str) -> None:
    server = start_server("basic.py", "http" if transport == "streamable_http" else "sse")
    try:
        async def scenario(conn: Connection) -> None:
            assert text_of(await conn.call_tool("echo", {"text": "up"})) == "up"
            with pytest.raises(ConnectionFailed, match=r"connection lost while waiting for tools/call"):
                await conn.call_tool("crash", timeout=5)

        run(with_connection(make_config(transport, url=server.url), scenario))
        assert server.process.wait(5) == 3
    finally:
        server.stop()


# -------------------------------------------------------------------- config


def test_server_config_fingerprint_and_validation() -> None:
    a = ServerConfig(name="x", transport="stdio", command="srv", args=["--a"], env={"B": "2", "A": "1"}, key=3)
    b = ServerConfig(name="x", transport="stdio", command="srv", args=("--a",), env=[("A", "1"), ("B", "2")], key=3)
    assert a == b and hash(a) == hash(b) and a.fingerprint() == b.fingerprint()
    assert a.env == (("A", "1"), ("B", "2")) and a.args == ("--a",)
    assert len(a.fingerprint()) == 64
    assert ServerConfig(name="x", transport="stdio", command="srv", env={"A": "other"}, key=3).fingerprint() != a.fingerprint()
    assert a.identity == "3" and ServerConfig(name="x", transport="stdio", command="srv").identity == "x"
    secret = ServerConfig(name="h", transport="streamable_http", url="http://h/mcp", headers={"Authorization": "Bearer s3cret"})
    assert "s3cret" not in repr(secret)
    with pytest.raises(ValueError):
        ServerConfig(name="x", transport="websocket", url="ws://h")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ServerConfig(name="x", transport="stdio")
    with pytest.raises(ValueError):
        ServerConfig(name="x", transport="sse")
    with pytest.raises(ValueError):
        ServerConfig(name="x", transport="stdio", command="srv", mode="2024")  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_http_headers_are_sent(transport: str, servers: dict[str, ServerProcess]) -> None:
    config = make_config(transport, servers, headers={"X-Inspector-Test": "yes", "Authorization": "Bearer t0k"})
    result = run(with_connection(config, lambda c: c.call_tool("request_headers")))
    headers = json.loads(text_of(result))
    assert headers["x-inspector-test"] == "yes"
    assert headers["authorization"] == "Bearer t0k"
