"""Start and stop test MCP servers as real subprocesses (HTTP/SSE on a free port).

Usage in tests::

    server = start_server("basic.py", "http")
    try:
        url = server.url          # http://127.0.0.1:<port>/mcp  (or .../sse)
    finally:
        server.stop()

or ``with start_server(...) as server:``. ``stop()`` kills the whole process
group so no orphan survives a failing test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from inspector.launch import free_port

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


def server_path(script: str) -> str:
    """Absolute path of a test server script in this directory."""
    return str(HERE / script)


@dataclass
class ServerProcess:
    """A running test server subprocess."""

    script: str
    transport: str
    port: int
    process: subprocess.Popen[bytes]
    args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        path = "/sse" if self.transport == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr_text(self) -> str:
        """What the server wrote to stderr so far (empty when MCP_TEST_SERVER_VERBOSE is set)."""
        log = getattr(self.process, "log", None)
        if log is None or log.closed:
            return getattr(self.process, "final_stderr", "")
        log.seek(0)
        return log.read().decode("utf-8", "replace")

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the process group, then SIGKILL; always reaps."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(timeout)
        else:
            self.process.wait()
        log = getattr(self.process, "log", None)
        if log is not None and not log.closed:
            self.process.final_stderr = self.stderr_text()  # type: ignore[attr-defined]
            log.close()

    def restart(self, ready_timeout: float = 15.0) -> None:
        """Stop and start again on the same port (to test reconnects)."""
        self.stop()
        self.process = _spawn(self.script, self.transport, self.port, self.args)
        wait_ready(self, ready_timeout)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _spawn(script: str, transport: str, port: int, args: list[str]) -> subprocess.Popen[bytes]:
    """Server stderr goes to a temp file (read it with ``stderr_text()``) unless
    MCP_TEST_SERVER_VERBOSE is set; an unread pipe could fill up and block the server."""
    log = None if os.environ.get("MCP_TEST_SERVER_VERBOSE") else tempfile.TemporaryFile()
    process = subprocess.Popen(
        [PYTHON, server_path(script), "--transport", transport, "--port", str(port), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    process.log = log  # type: ignore[attr-defined]
    return process


def wait_ready(server: ServerProcess, timeout: float = 15.0) -> None:
    """Poll the TCP port until the server accepts connections (or fail loudly)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"{server.script} exited early with code {server.process.returncode}:\n{server.stderr_text()[-2000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"{server.script} did not listen on port {server.port} within {timeout}s")


def start_server(
    script: str, transport: str, *args: str, port: int | None = None, ready_timeout: float = 15.0
) -> ServerProcess:
    """Start ``script`` with ``--transport http|sse`` on a free port and wait until it listens."""
    if transport not in ("http", "sse"):
        raise ValueError("start_server is for network transports; stdio servers are spawned by the client")
    port = port or free_port()
    server = ServerProcess(script, transport, port, _spawn(script, transport, port, list(args)), list(args))
    wait_ready(server, ready_timeout)
    return server


def pid_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def wait_pid_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False
