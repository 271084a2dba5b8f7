"""A stdio MCP server as a child process: the transport the inspector uses for it (Django-free).

Ours, modelled on ``mcp.client.stdio``, because the SDK's hides the process (no pid; stderr goes
to a file) and parses lines before anyone can see the raw JSON. Here every stdout line is parsed
once, keeping the exact object read (``RawSessionMessage.raw``) or saying why it is not JSON-RPC
(``InvalidFrame``); stderr lines are kept (the last ``STDERR_LINES``) and reported; the pid and
exit code stay readable (``StdioProcess``). tools/mcp/connection.py taps these streams like any
other transport's.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from tools.mcp.config import ServerConfig
from tools.mcp.errors import ConnectionFailed
from tools.mcp.link import Link
from tools.mcp.wire_result import lean_envelope

logger = logging.getLogger(__name__)

STDERR_LINES = 200


class StdioStartFailed(ConnectionFailed):
    """The server's process could not be started (missing command, missing working directory)."""


class InvalidFrame(ValueError):
    """A line from a stdio server that is not a JSON-RPC message."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid message from server ({reason}): {text[:200]!r}")
        self.text = text
        self.reason = reason


@dataclass
class RawSessionMessage(SessionMessage):
    """A SessionMessage that remembers the exact JSON object read off the wire."""

    raw: dict[str, Any] = field(default_factory=dict)


class StdioProcess:
    """State of our stdio child, readable by the Connection for pid/exit code/stderr."""

    def __init__(self) -> None:
        self.process: anyio.abc.Process | None = None
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None

    @property
    def exited(self) -> bool:
        """Whether the child has ended, even before the event loop has heard of it.

        `returncode` is set by the event loop a moment after the child dies (its watcher thread
        reaps it, then a callback runs on the loop); a call that picked the connection in that
        moment went to a dead server and failed "connection lost" instead of starting it again.
        Linux's /proc tells at once (a zombie, or no entry once reaped) without reaping it. (`waitid`
        with WNOWAIT does not: it sees nothing while the watcher thread is reaping the child.)"""
        if self.process is None:
            return False
        if self.process.returncode is not None:
            return True
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as stat:
                return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
        except FileNotFoundError:
            return os.path.isdir("/proc/self")  # reaped, where /proc exists; elsewhere the loop will tell
        except OSError:
            return False


class StdioLink(Link):
    """A server the inspector starts as a child process; its exit code and stderr explain its failures."""

    def __init__(self, config: ServerConfig, wants_lean: Callable[[Any], bool], on_stderr: Callable[[str], None] | None) -> None:
        super().__init__(config, wants_lean)
        self.state = StdioProcess()
        self.on_stderr = on_stderr

    def open(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        return stdio_transport(self.config, self.state, self.on_stderr, self.wants_lean)

    @property
    def alive(self) -> bool:
        return not self.state.exited

    @property
    def pid(self) -> int | None:
        return self.state.pid

    @property
    def stderr_tail(self) -> list[str]:
        return list(self.state.stderr_tail)

    def where(self) -> str:
        return " ".join(shlex.join([self.config.command, *self.config.args]).split())[:300]

    def context(self) -> str:
        """Exit code and stderr tail: what makes a stdio failure understandable."""
        extra = ""
        code = self.state.returncode
        if code is not None:
            extra += f"; server process exited with code {code}"
        tail = [line for line in self.state.stderr_tail if line.strip()][-5:]
        if tail:
            extra += "; stderr: " + " | ".join(tail)[-800:]
        return extra

    def kill(self) -> None:
        process = self.state.process
        if process is not None and process.returncode is None:
            try:
                os.killpg(process.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass


def parse_line(line: str) -> SessionMessage | Exception:
    try:
        raw = json.loads(line)
    except ValueError as exc:
        return InvalidFrame(line, f"not JSON: {exc}")
    try:
        message = types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return InvalidFrame(line, "not a JSON-RPC message")
    return RawSessionMessage(message, raw=raw)


def lean_message(line: bytes | bytearray, lean_for: Callable[[Any], bool] | None) -> SessionMessage | None:
    """A large answer that `lean_for(its id)` wants, read lean, never decoded whole
    (tools/mcp/wire_result.py); None for every other line (parse it as usual)."""
    found = lean_envelope(line, lean_for) if lean_for is not None else None
    if found is None:
        return None
    request_id, result = found
    message = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
    return RawSessionMessage(message, raw={"jsonrpc": "2.0", "id": request_id, "result": result})


@asynccontextmanager
async def stdio_transport(
    config: ServerConfig, state: StdioProcess, on_stderr: Callable[[str], None] | None,
    lean_for: Callable[[Any], bool] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Newline-delimited JSON-RPC over a child's stdin/stdout, modelled on ``mcp.client.stdio``.

    Ours because the SDK's hides the process (no pid, stderr goes to a file) and
    parses lines before anyone can see the raw JSON. Shutdown follows the spec:
    close stdin, wait, SIGTERM the process group, SIGKILL; every wait bounded.
    """
    env = {**get_default_environment(), **dict(config.env)}
    if config.cwd and not os.path.isdir(config.cwd):
        raise StdioStartFailed(f"{config.name}: working directory {config.cwd!r} does not exist")
    try:
        process = await anyio.open_process(
            [config.command, *config.args], env=env, cwd=config.cwd or None, start_new_session=True
        )
    except OSError as exc:
        raise StdioStartFailed(
            f"{config.name}: could not start {config.command!r}: {exc.strerror or exc}"
        ) from exc
    state.process = process
    assert process.stdin and process.stdout and process.stderr
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        # The line being read grows in place (a large bytearray is grown by remapping, not
        # copying); a finished line is handed on whole and never copied: a 40 MB answer costs
        # the worker its 40 MB once.
        line = bytearray()
        async with read_send:
            try:
                async for chunk in process.stdout:  # type: ignore[union-attr]
                    start = 0
                    while (end := chunk.find(b"\n", start)) >= 0:
                        line += memoryview(chunk)[start:end]
                        start = end + 1
                        done, line = line, bytearray()
                        message = lean_message(done, lean_for)
                        if message is None:
                            # Each copy of a big line is let go as soon as the next exists.
                            text, done = done.decode("utf-8", errors="replace").strip(), None
                            if text:
                                message, text = parse_line(text), ""
                        done = None  # a lean message keeps what it needs of it
                        if message is not None:
                            await read_send.send(message)
                        message = None  # not kept until the next line arrives
                    line += memoryview(chunk)[start:]
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                pass
            # EOF: give the exit code and last stderr lines a moment to arrive, for a clearer error.
            with anyio.move_on_after(0.5):
                await stderr_done.wait()
                while process.returncode is None:
                    await anyio.sleep(0.01)

    stderr_done = anyio.Event()

    async def stderr_reader() -> None:
        buffer = b""
        try:
            async for chunk in process.stderr:  # type: ignore[union-attr]
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()[-65536:]
                for line in lines:
                    text = line.decode("utf-8", errors="replace").rstrip()
                    state.stderr_tail.append(text)
                    if on_stderr is not None:
                        try:
                            on_stderr(text)
                        except Exception:
                            logger.exception("on_stderr callback raised")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            stderr_done.set()

    async def stdin_writer() -> None:
        try:
            async with write_recv:
                async for item in write_recv:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())  # type: ignore[union-attr]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()  # the session must see the end, not hang

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stderr_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_recv, write_send
        finally:
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                await stop_process(process)
            tg.cancel_scope.cancel()


async def stop_process(process: anyio.abc.Process) -> None:
    """Close stdin, give the server 2s to exit, then TERM/KILL its whole process group."""
    try:
        await process.stdin.aclose()  # type: ignore[union-attr]
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    with anyio.move_on_after(2.0):
        while process.returncode is None:
            await anyio.sleep(0.01)
    if process.returncode is None:
        await terminate_posix_process_tree(process, 2.0)
        with anyio.move_on_after(2.0):
            while process.returncode is None:
                await anyio.sleep(0.01)
    for stream in (process.stdout, process.stderr):
        try:
            await stream.aclose()  # type: ignore[union-attr]
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
