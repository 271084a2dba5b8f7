"""A per-process pool of warm MCP connections for synchronous callers (Django-free).

Celery tasks are synchronous, but MCP connections are async and expensive to
open (a stdio server is a whole process). The pool owns one background thread
running an asyncio loop; ``pool.run(config, fn, timeout)`` runs ``fn(connection)``
on that loop and returns its result to the calling thread.

* One connection per ``config.fingerprint()``, reused across calls.
* A ``ConnectionFailed`` from a call drops that connection; the next call
  reconnects. Failed *connect* attempts back off exponentially per server
  (``backoff_min``..``backoff_max``); a call arriving during the back-off waits
  if its budget allows, otherwise fails at once. Other servers are unaffected.
* A config whose ``identity`` (``key``, else ``name``) matches a pooled
  connection with a different fingerprint replaces it: the old one is closed.
* A reaper closes connections idle for ``idle_timeout`` seconds (unless they hold resource
  subscriptions), and dead ones.
* ``get_pool()`` is a per-process singleton, reset in forked children (Celery
  prefork): a child must never use the parent's loop thread.

Callbacks (``on_frame(config, direction, message, at)``,
``on_notification(config, method, params)``, ``on_stderr(config, line)``) are
called **on the pool's loop thread**, synchronously, while the transport is
reading. Keep them fast and thread-safe (e.g. append to a queue); never call
``pool.run`` from inside one. They are read at call time, so they can be
assigned after the pool exists. ``on_server_request(config, method, params, tag)``
is different: async, awaited on the loop for what a server asks of the client
(see ``Connection``), read when a connection opens.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import context as otel_context

from tools.mcp.config import ServerConfig
from tools.mcp.connection import Connection
from tools.mcp.errors import CallTimeout, ConnectionFailed

__all__ = ["Pool", "get_pool", "reset_pool"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
FrameHook = Callable[[ServerConfig, str, dict[str, Any], float], None]
NotificationHook = Callable[[ServerConfig, str, dict[str, Any]], None]
StderrHook = Callable[[ServerConfig, str], None]
ServerRequestPoolHook = Callable[[ServerConfig, str, dict[str, Any], Any], Awaitable[dict[str, Any]]]

_SYNC_MARGIN = 15.0  # extra wait in the calling thread beyond the loop-side budget
_ADMIN_TIMEOUT = 20.0  # drop/close_all: enough for several stdio shutdowns


@dataclass
class _Entry:
    config: ServerConfig
    connection: Connection
    last_used: float
    in_use: int = 0


@dataclass
class _Backoff:
    failures: int
    retry_at: float
    last_error: str


class Pool:
    """Warm MCP connections behind a synchronous ``run()``; see the module docstring."""

    def __init__(
        self,
        *,
        on_frame: FrameHook | None = None,
        on_notification: NotificationHook | None = None,
        on_stderr: StderrHook | None = None,
        on_server_request: ServerRequestPoolHook | None = None,
        idle_timeout: float = 300.0,
        backoff_min: float = 0.5,
        backoff_max: float = 30.0,
        reap_interval: float | None = None,
    ) -> None:
        self.on_frame = on_frame
        self.on_notification = on_notification
        self.on_stderr = on_stderr
        # Async, awaited on the loop (see Connection.on_server_request); read when a connection opens.
        self.on_server_request = on_server_request
        self.idle_timeout = idle_timeout
        self.backoff_min = backoff_min
        self.backoff_max = backoff_max
        self._reap_interval = reap_interval if reap_interval is not None else max(0.05, min(idle_timeout / 4, 30.0))
        self._entries: dict[str, _Entry] = {}  # fingerprint -> entry; touched only on the loop
        self._by_identity: dict[str, str] = {}  # identity -> fingerprint
        self._backoff: dict[str, _Backoff] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._owner_pid = os.getpid()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, args=(started,), name="mcp-pool", daemon=True)
        self._thread.start()
        started.wait()
        self._reaper: asyncio.Task[None] = self._submit(self._start_reaper()).result()
        _POOLS.add(self)

    # ------------------------------------------------------------ threading

    def _run_loop(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(started.set)
        self._loop.run_forever()

    def _check_usable(self) -> None:
        if os.getpid() != self._owner_pid:
            raise RuntimeError("this Pool belongs to the parent process; call get_pool() in the child")
        if self._closed:
            raise RuntimeError("the Pool is shut down")
        if threading.current_thread() is self._thread:
            raise RuntimeError("Pool.run() called from the pool's own loop thread (e.g. from a callback)")

    def _submit(self, coro: Awaitable[T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ API

    def run(self, config: ServerConfig, fn: Callable[[Connection], Awaitable[T]], timeout: float | None = None) -> T:
        """Run ``await fn(connection)`` on the pool loop; return its result (or raise its error).

        ``timeout`` bounds the whole operation, connecting included (default:
        ``connect_timeout + call_timeout``). Raises ConnectionFailed, CallTimeout,
        or whatever ``fn`` raises.
        """
        self._check_usable()
        budget = timeout if timeout is not None else config.connect_timeout + config.call_timeout
        future = self._submit(_in_context(self._run(config, fn, budget), otel_context.get_current()))
        try:
            return future.result(budget + _SYNC_MARGIN)
        except TimeoutError:
            if future.done():
                raise
            future.cancel()
            raise CallTimeout(f"{config.name}: the pool did not answer within {budget:g}s") from None

    async def arun(
        self, config: ServerConfig, fn: Callable[[Connection], Awaitable[T]], timeout: float | None = None
    ) -> T:
        """``run()`` for callers on *another* event loop (e.g. an async Django view): awaits, never blocks."""
        self._check_usable()
        budget = timeout if timeout is not None else config.connect_timeout + config.call_timeout
        return await asyncio.wrap_future(self._submit(_in_context(self._run(config, fn, budget), otel_context.get_current())))

    def drop(self, fingerprint: str) -> bool:
        """Close the connection for this fingerprint (and forget its back-off). True if one existed.

        Forgiving: a value that is no pooled fingerprint is treated as a server identity
        (``drop_server``), so ``drop(config.key)`` also works.
        """
        self._check_usable()
        return self._submit(self._drop_any(fingerprint)).result(_ADMIN_TIMEOUT)

    def drop_server(self, identity: str | int) -> int:
        """Close every connection whose config identity (key, else name) matches. Returns how many."""
        self._check_usable()
        return self._submit(self._drop_identity(str(identity))).result(_ADMIN_TIMEOUT)

    def close_all(self) -> None:
        """Close every pooled connection; the pool stays usable."""
        if self._closed or os.getpid() != self._owner_pid:
            return
        self._submit(self._close_all()).result(_ADMIN_TIMEOUT)

    def shutdown(self) -> None:
        """Close everything and stop the loop thread. The pool cannot be used afterwards."""
        if self._closed or os.getpid() != self._owner_pid:
            return
        try:
            self.close_all()
        finally:
            self._closed = True
            try:
                self._submit(self._stop_reaper()).result(5.0)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(5.0)
                if not self._thread.is_alive():
                    self._loop.close()

    def stats(self) -> list[dict[str, Any]]:
        """A snapshot of pooled connections (for admin pages and tests)."""
        self._check_usable()
        return self._submit(self._stats()).result(_ADMIN_TIMEOUT)

    # ------------------------------------------------------------ loop side

    async def _stats(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [
            {
                "fingerprint": fp,
                "name": e.config.name,
                "identity": e.config.identity,
                "transport": e.config.transport,
                "pid": e.connection.pid,
                "protocol_version": e.connection.protocol_version,
                "alive": e.connection.alive,
                "in_use": e.in_use,
                "idle_seconds": now - e.last_used,
            }
            for fp, e in self._entries.items()
        ]

    async def _run(self, config: ServerConfig, fn: Callable[[Connection], Awaitable[T]], budget: float) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        try:
            async with asyncio.timeout(budget) as scope:
                entry = await self._acquire(config, deadline)
                entry.in_use += 1
                try:
                    return await fn(entry.connection)
                except ConnectionFailed:
                    await self._discard(entry)
                    raise
                finally:
                    entry.in_use -= 1
                    entry.last_used = time.monotonic()
        except TimeoutError:
            if scope.expired():
                raise CallTimeout(f"{config.name}: did not finish within {budget:g}s") from None
            raise

    async def _acquire(self, config: ServerConfig, deadline: float) -> _Entry:
        fp = config.fingerprint()
        previous = self._by_identity.get(config.identity)
        if previous is not None and previous != fp:
            # Same server, new settings: the old connection must not linger.
            logger.info("%s: settings changed; closing the connection made with the old ones", config.name)
            await self._drop_fingerprint(previous)
        self._by_identity[config.identity] = fp
        lock = self._locks.setdefault(fp, asyncio.Lock())
        async with lock:
            entry = self._entries.get(fp)
            if entry is not None:
                if entry.connection.alive:
                    entry.last_used = time.monotonic()
                    return entry
                # Logged: calls still in flight on it end "connection lost" when it closes.
                logger.info("%s: the pooled connection is no longer usable; closing it and connecting again",
                            config.name)
                await self._discard(entry)
            await self._wait_backoff(config, fp, deadline)
            connection = Connection(
                config,
                on_frame=lambda d, m, at: self._hook(self.on_frame, config, d, m, at),
                on_notification=lambda method, params: self._hook(self.on_notification, config, method, params),
                on_stderr=lambda line: self._hook(self.on_stderr, config, line),
                on_server_request=self._server_request_hook(config),
            )
            try:
                await connection.connect()
            except ConnectionFailed as exc:
                failed = self._backoff.get(fp)
                failures = (failed.failures if failed else 0) + 1
                delay = min(self.backoff_max, self.backoff_min * 2 ** (failures - 1))
                self._backoff[fp] = _Backoff(failures, time.monotonic() + delay, str(exc))
                raise
            self._backoff.pop(fp, None)
            entry = _Entry(config, connection, time.monotonic())
            self._entries[fp] = entry
            return entry

    async def _wait_backoff(self, config: ServerConfig, fp: str, deadline: float) -> None:
        failed = self._backoff.get(fp)
        if failed is None:
            return
        wait = failed.retry_at - time.monotonic()
        if wait <= 0:
            return
        if asyncio.get_running_loop().time() + wait >= deadline:
            raise ConnectionFailed(
                f"{config.name}: not retrying yet after {failed.failures} failed attempt(s) "
                f"(next attempt in {wait:.1f}s); last error: {failed.last_error}"
            )
        await asyncio.sleep(wait)

    def _server_request_hook(self, config: ServerConfig) -> Any:
        hook = self.on_server_request
        if hook is None:
            return None
        return lambda method, params, tag: hook(config, method, params, tag)

    @staticmethod
    def _hook(hook: Callable[..., None] | None, *args: Any) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            logger.exception("pool callback raised")

    async def _discard(self, entry: _Entry) -> None:
        """Forget ``entry`` if it is still the current one for its fingerprint, and close it."""
        fp = entry.config.fingerprint()
        if self._entries.get(fp) is entry:
            del self._entries[fp]
        await entry.connection.close()

    async def _drop_fingerprint(self, fp: str) -> bool:
        self._backoff.pop(fp, None)
        entry = self._entries.pop(fp, None)
        for identity, known in list(self._by_identity.items()):
            if known == fp:
                del self._by_identity[identity]
        if entry is None:
            return False
        await entry.connection.close()
        return True

    async def _drop_any(self, value: str) -> bool:
        if value in self._entries or value in self._backoff:
            return await self._drop_fingerprint(value)
        return await self._drop_identity(str(value)) > 0

    async def _drop_identity(self, identity: str) -> int:
        fps = {fp for fp, e in self._entries.items() if e.config.identity == identity}
        if identity in self._by_identity:
            fps.add(self._by_identity[identity])
        results = await asyncio.gather(*(self._drop_fingerprint(fp) for fp in fps))
        return sum(results)

    async def _close_all(self) -> None:
        entries = list(self._entries.values())
        self._entries.clear()
        self._by_identity.clear()
        self._backoff.clear()
        await asyncio.gather(*(e.connection.close() for e in entries), return_exceptions=True)

    async def _start_reaper(self) -> asyncio.Task[None]:
        return asyncio.create_task(self._reap_forever(), name="mcp-pool-reaper")

    async def _stop_reaper(self) -> None:
        self._reaper.cancel()
        await asyncio.gather(self._reaper, return_exceptions=True)

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self._reap_interval)
            try:
                await self._reap()
            except Exception:
                logger.exception("pool reaper failed")

    async def _reap(self) -> None:
        now = time.monotonic()
        # A connection holding resource subscriptions is not idle: closing it would end them.
        stale = [
            e
            for e in self._entries.values()
            if e.in_use == 0 and ((now - e.last_used > self.idle_timeout and not e.connection.subscriptions.subscribed)
                                  or not e.connection.alive)
        ]
        for entry in stale:
            logger.debug("closing %s connection to %s", "idle" if entry.connection.alive else "dead", entry.config.name)
            await self._discard(entry)


# ------------------------------------------------------------------ singleton

_POOLS: weakref.WeakSet[Pool] = weakref.WeakSet()
_pool: Pool | None = None
_pool_lock = threading.Lock()


async def _in_context(coro: Awaitable[T], ctx: otel_context.Context) -> T:
    """Run `coro` on the pool's loop in the caller's trace context: a task made there copies the
    loop thread's context, so without this no MCP request would carry the caller's `traceparent`."""
    token = otel_context.attach(ctx)
    try:
        return await coro
    finally:
        otel_context.detach(token)


def get_pool(**kwargs: Any) -> Pool:
    """The process-wide pool, created on first use (``kwargs`` only apply then)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool._owner_pid != os.getpid() or _pool._closed:  # noqa: SLF001
            _pool = Pool(**kwargs)
        return _pool


def reset_pool() -> None:
    """Shut the process-wide pool down (tests, worker shutdown)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown()


def _after_fork_in_child() -> None:
    # The loop thread does not exist in the child; forget the parent's pool
    # without touching its connections (they belong to the parent).
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


def _at_exit() -> None:
    for pool in list(_POOLS):
        try:
            pool.shutdown()
        except Exception:
            logger.exception("pool shutdown at exit failed")


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
