"""tools.mcp.pool: warm connection reuse, recovery, replacement and reaping, from synchronous code.

No Django: run with ``python -m pytest tests/tools/test_pool.py -p no:django``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.mcp_servers.launch import ServerProcess, free_port, pid_alive, server_path, start_server, wait_pid_gone  # noqa: E402
from tools.mcp import pool as pool_module
from tools.mcp.config import ServerConfig  # noqa: E402
from tools.mcp.connection import Connection  # noqa: E402
from tools.mcp.errors import CallTimeout, ConnectionFailed  # noqa: E402
from tools.mcp.pool import Pool, get_pool  # noqa: E402

# Every test here starts real MCP servers or workers of its own.
pytestmark = pytest.mark.worker

TRANSPORTS = ["stdio", "streamable_http", "sse"]


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []) if block.get("type") == "text")


async def whoami(conn: Connection) -> int:
    return int(text_of(await conn.call_tool("whoami")))


def stdio_config(name: str = "basic", key: str | None = None, **overrides: Any) -> ServerConfig:
    options: dict[str, Any] = {"connect_timeout": 10.0, "call_timeout": 10.0, **overrides}
    return ServerConfig(name=name, transport="stdio", command=sys.executable, args=(server_path("basic.py"),), key=key, **options)


def url_config(transport: str, url: str, name: str = "net", **overrides: Any) -> ServerConfig:
    options: dict[str, Any] = {"connect_timeout": 10.0, "call_timeout": 10.0, **overrides}
    return ServerConfig(name=name, transport=transport, url=url, **options)  # type: ignore[arg-type]


def stdio_children(script: str = "basic.py") -> list[int]:
    """Live (non-zombie) child processes of this test process running ``script``."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and any(script in part for part in child.cmdline()):
                found.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return found


def wait_until(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


@pytest.fixture(scope="module")
def net_servers() -> Iterator[dict[str, ServerProcess]]:
    started = {"streamable_http": start_server("basic.py", "http"), "sse": start_server("basic.py", "sse")}
    try:
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture
def frames() -> list[tuple[ServerConfig, str, dict[str, Any], float]]:
    return []


@pytest.fixture
def pool(frames: list[Any]) -> Iterator[Pool]:
    p = Pool(on_frame=lambda config, d, m, at: frames.append((config, d, m, at)), idle_timeout=60)
    try:
        yield p
    finally:
        p.shutdown()


def config_for(transport: str, net_servers: dict[str, ServerProcess]) -> ServerConfig:
    if transport == "stdio":
        return stdio_config()
    return url_config(transport, net_servers[transport].url)


# ----------------------------------------------------------------------- reuse


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connection_is_reused(transport: str, pool: Pool, frames: list[Any], net_servers: dict[str, ServerProcess]) -> None:
    config = config_for(transport, net_servers)
    before = set(stdio_children())
    first = pool.run(config, whoami)
    second = pool.run(config, whoami)
    third = pool.run(config, lambda c: c.list_tools())
    assert first == second
    assert "whoami" in {tool["name"] for tool in third}

    handshakes = [m for _, d, m, _ in frames if d == "out" and m.get("method") in ("server/discover", "initialize")]
    assert len(handshakes) == 1, "a second call must not open a second connection"
    assert all(cfg is config for cfg, _, _, _ in frames)

    stats = pool.stats()
    assert len(stats) == 1 and stats[0]["alive"] and stats[0]["in_use"] == 0
    if transport == "stdio":
        assert stats[0]["pid"] == first
        # Compare sets: stdio servers of earlier tests may still be exiting meanwhile.
        assert set(stdio_children()) - before == {first}, "exactly one new stdio server process"
    else:
        assert first == net_servers[transport].pid


def test_concurrent_calls_share_one_stdio_process(pool: Pool) -> None:
    config = stdio_config()
    before = set(stdio_children())
    results: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(pool.run(config, whoami))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert len(set(results)) == 1
    assert set(stdio_children()) - before == {results[0]}


def test_notifications_reach_the_pool_callback() -> None:
    notes: list[tuple[ServerConfig, str, dict[str, Any]]] = []
    p = Pool(on_notification=lambda config, method, params: notes.append((config, method, params)))
    try:
        config = stdio_config()
        p.run(config, lambda c: c.call_tool("add_tool_now"))
        assert wait_until(lambda: any(m == "notifications/tools/list_changed" for _, m, _ in notes))
        assert all(cfg is config for cfg, _, _ in notes)
    finally:
        p.shutdown()


# -------------------------------------------------------------------- recovery


def test_crash_gives_clear_error_and_next_call_reconnects(pool: Pool) -> None:
    config = stdio_config()
    old_pid = pool.run(config, whoami)
    with pytest.raises(ConnectionFailed, match="exited with code 3"):
        pool.run(config, lambda c: c.call_tool("crash"))
    assert pool.stats() == []
    new_pid = pool.run(config, whoami)
    assert new_pid != old_pid
    assert not pid_alive(old_pid)


def test_killed_stdio_server_is_replaced(pool: Pool) -> None:
    config = stdio_config()
    old_pid = pool.run(config, whoami)
    os.kill(old_pid, signal.SIGKILL)
    assert wait_until(lambda: not any(s["alive"] for s in pool.stats())), "the pool did not notice the death"
    new_pid = pool.run(config, whoami)
    assert new_pid != old_pid
    assert pool.run(config, whoami) == new_pid


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
@pytest.mark.parametrize("legacy", [False, True], ids=["modern", "legacy"])
def test_network_server_restart_is_survived(transport: str, legacy: bool, pool: Pool) -> None:
    server = start_server("basic.py", "http" if transport == "streamable_http" else "sse", *(["--legacy"] if legacy else []))
    try:
        config = url_config(transport, server.url)
        first = pool.run(config, whoami)
        with pytest.raises(ConnectionFailed):
            pool.run(config, lambda c: c.call_tool("crash", timeout=5))
        server.restart()
        # At most one call may still fail on a connection that has not noticed the restart yet.
        try:
            second = pool.run(config, whoami)
        except ConnectionFailed:
            second = pool.run(config, whoami)
        assert second == server.pid != first
    finally:
        server.stop()


def test_slow_call_times_out_and_keeps_the_connection(pool: Pool) -> None:
    config = stdio_config()
    pid = pool.run(config, whoami)
    started = time.monotonic()
    with pytest.raises(CallTimeout, match="within 0.5s"):
        pool.run(config, lambda c: c.call_tool("slow", {"seconds": 5}, timeout=0.5))
    assert time.monotonic() - started < 5, "it waited for the slow tool instead of timing out"
    assert pool.run(config, whoami) == pid


def test_run_budget_bounds_the_whole_operation(pool: Pool) -> None:
    config = stdio_config()
    pool.run(config, whoami)
    started = time.monotonic()
    with pytest.raises(CallTimeout, match="did not finish within 0.7s"):
        pool.run(config, lambda c: c.call_tool("slow", {"seconds": 5}), timeout=0.7)
    assert time.monotonic() - started < 5, "it waited for the slow tool instead of its budget"


# ------------------------------------------------------------ config changes


def test_changed_fingerprint_for_same_key_closes_old_connection(pool: Pool) -> None:
    old_config = stdio_config(key="server-1", env={"FLAVOUR": "a"})
    new_config = stdio_config(key="server-1", env={"FLAVOUR": "b"})
    assert old_config.fingerprint() != new_config.fingerprint()
    assert stdio_config(key="server-1", env={"FLAVOUR": "a"}).fingerprint() == old_config.fingerprint()

    old_pid = pool.run(old_config, whoami)
    new_pid = pool.run(new_config, whoami)
    assert new_pid != old_pid
    assert wait_pid_gone(old_pid, 5), "the old connection's server survived the config change"
    assert [s["pid"] for s in pool.stats()] == [new_pid]


def test_other_key_with_other_settings_is_independent(pool: Pool) -> None:
    a = pool.run(stdio_config(key="a"), whoami)
    b = pool.run(stdio_config(key="b"), whoami)
    assert a != b and pid_alive(a) and pid_alive(b)
    assert len(pool.stats()) == 2


def test_drop_and_drop_server(pool: Pool) -> None:
    config = stdio_config(key=7)
    pid = pool.run(config, whoami)
    assert pool.drop_server(7) == 1
    assert wait_pid_gone(pid, 5)
    pid2 = pool.run(config, whoami)
    assert pool.drop(config.fingerprint()) is True
    assert wait_pid_gone(pid2, 5)
    assert pool.drop(config.fingerprint()) is False
    assert pool.stats() == []
    pid3 = pool.run(config, whoami)
    assert pool.drop("7") is True, "drop() also accepts the server key"
    assert wait_pid_gone(pid3, 5)


def test_idle_connections_are_reaped() -> None:
    p = Pool(idle_timeout=0.5, reap_interval=0.1)
    try:
        config = stdio_config()
        pid = p.run(config, whoami)
        assert wait_pid_gone(pid, 5), "idle connection was not reaped"
        assert p.stats() == []
        assert p.run(config, whoami) != pid
    finally:
        p.shutdown()


def test_busy_connection_is_not_reaped() -> None:
    p = Pool(idle_timeout=0.3, reap_interval=0.05)
    try:
        config = stdio_config()
        pid = p.run(config, whoami)

        async def slow_then_whoami(conn: Connection) -> int:
            # Outlives idle_timeout while in use: a reaped connection would raise ConnectionFailed.
            assert "slept" in text_of(await conn.call_tool("slow", {"seconds": 1.0}))
            return await whoami(conn)

        assert p.run(config, slow_then_whoami) == pid
    finally:
        p.shutdown()


# ------------------------------------------------------------ failing servers


def test_unreachable_url_fails_within_timeout_and_backs_off(pool: Pool) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    config = url_config("streamable_http", url, name="gone", connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match="cannot connect"):
        pool.run(config, whoami)
    assert time.monotonic() - started < 2.5
    # Within the back-off window a call with a small budget fails at once, naming the last error.
    with pytest.raises(ConnectionFailed, match=r"not retrying yet after 1 failed attempt.*cannot connect"):
        pool.run(config, whoami, timeout=0.2)
    # A call with enough budget waits out the back-off and tries again (and fails again).
    with pytest.raises(ConnectionFailed, match="cannot connect"):
        pool.run(config, whoami, timeout=5)
    with pytest.raises(ConnectionFailed, match=r"not retrying yet after 2 failed attempt"):
        pool.run(config, whoami, timeout=0.2)


def test_wrong_command_fails_fast(pool: Pool) -> None:
    config = ServerConfig(name="typo", transport="stdio", command="/nonexistent/mcp-typo", connect_timeout=5)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match="could not start"):
        pool.run(config, whoami)
    assert time.monotonic() - started < 5, "a command that cannot start waited out the connect timeout"


def test_failing_server_does_not_block_other_servers(pool: Pool) -> None:
    with socket.socket() as listener:  # accepts TCP, never answers: connecting hangs until the timeout
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        hanging = url_config("streamable_http", f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", name="hang",
                             connect_timeout=4)
        healthy = stdio_config()
        pool.run(healthy, whoami)  # warm

        failure: list[BaseException] = []

        def call_hanging() -> None:
            try:
                pool.run(hanging, whoami)
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=call_hanging)
        thread.start()
        time.sleep(0.3)
        started = time.monotonic()
        for _ in range(5):
            pool.run(healthy, whoami)
        # Less than the hanging server's 4 s connect timeout: they did not wait for it.
        assert time.monotonic() - started < 4, "calls to a healthy server waited for the hanging one"
        thread.join(15)
        assert failure and isinstance(failure[0], ConnectionFailed)
        assert "within 4s" in str(failure[0])


# -------------------------------------------------------------- process model


def test_get_pool_is_a_singleton_reset_after_fork() -> None:
    parent = get_pool()
    assert get_pool() is parent
    config = stdio_config()
    parent_pid = parent.run(config, whoami)

    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            try:
                parent.run(config, whoami)
            except RuntimeError:
                mine = get_pool()
                if mine is not parent and pool_module._pool is mine:
                    if mine.run(config, whoami) != parent_pid:
                        status = 0
                mine.shutdown()
        finally:
            os._exit(status)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        pytest.fail("forked child hung")
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's pool and its connection are untouched by the child.
    assert parent.run(config, whoami) == parent_pid
    pool_module.reset_pool()
    assert wait_pid_gone(parent_pid, 5)


def test_run_from_callback_thread_is_refused() -> None:
    errors: list[BaseException] = []
    holder: dict[str, Pool] = {}

    def on_frame(config: ServerConfig, direction: str, message: dict[str, Any], at: float) -> None:
        if not errors:
            try:
                holder["pool"].run(config, whoami)
            except RuntimeError as exc:
                errors.append(exc)

    p = Pool(on_frame=on_frame)
    holder["pool"] = p
    try:
        p.run(stdio_config(), whoami)
        assert errors and "loop thread" in str(errors[0])
    finally:
        p.shutdown()


def test_arun_from_another_event_loop(pool: Pool) -> None:
    import asyncio

    async def main() -> tuple[int, int]:
        config = stdio_config()
        first, second = await asyncio.gather(pool.arun(config, whoami), pool.arun(config, whoami))
        return first, second

    first, second = asyncio.run(main())
    assert first == second == pool.stats()[0]["pid"]
