"""Waiting across processes on Redis: a worker waits for what a web request sends it.

Three waits exist. A script that started a call may wait for its end (`ended_key`, pushed
when the call's final event goes out). A worker holding a live call waits for the answer to a server's request
(`answer_key`), and for a Cancel of the call (`cancel_key`). Web views `push` one JSON message
onto the key; the worker `wait`s with BLPOP, bounded by the call's remaining time. A list, not
pub/sub: a message pushed a moment before the worker starts waiting is not lost.

The worker side is async (it runs on the MCP pool's event loop, which must never block); the
web side is synchronous: a plain push, and `wait_blocking` in a request's own thread for a
call's end.

A Cancel is waited for during every call, and nearly every call ends without one: a BLPOP
cancelled when its call ends costs its connection (redis-py drops a connection whose answer is
pending), so each call made a new one. A Cancel is therefore also announced on a channel
(`announcements`) that one connection per worker event loop listens to (`wait_announced`): a call
looks at its list once, then waits for the announcement, and no connection is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from typing import Any

import redis
import redis.asyncio as aredis
from django.conf import settings

log = logging.getLogger(__name__)

_KEY_TTL = 3600  # a message nobody took (the call already ended) does not stay forever


def answer_key(server_request_id) -> str:
    return f"{settings.REDIS_PREFIX}server-request:{server_request_id}"


def cancel_key(tool_call_id) -> str:
    return f"{settings.REDIS_PREFIX}tool-call-cancel:{tool_call_id}"


def ended_key(tool_call_id) -> str:
    """Where a call's end is told to a script waiting for it (`POST …/call/?wait=`)."""
    return f"{settings.REDIS_PREFIX}tool-call-ended:{tool_call_id}"


_sync_client: redis.Redis | None = None
_SOCKET_TIMEOUT = 5.0  # seconds; a blocking wait on this client is shorter (wait_blocking)
_sync_lock = threading.Lock()


def announcements() -> str:
    """The channel on which a push for `wait_announced` names its key (a Cancel: `cancel_key`)."""
    return f"{settings.REDIS_PREFIX}announced-pushes"


def _client() -> redis.Redis:
    """The process's synchronous client (thread-safe: each command takes a connection of its pool)."""
    global _sync_client
    with _sync_lock:
        if _sync_client is None:
            _sync_client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=_SOCKET_TIMEOUT,
                                                socket_connect_timeout=5)
        return _sync_client


def push(key: str, message: dict[str, Any], ttl: int = _KEY_TTL, announce: bool = False) -> None:
    """Hand `message` to whoever waits on `key` (now or within `ttl` seconds); `announce` for a key
    a worker waits on with `wait_announced`."""
    pipe = _client().pipeline()
    pipe.rpush(key, json.dumps(message))
    pipe.expire(key, ttl)
    if announce:
        pipe.publish(announcements(), key)
    pipe.execute()


def wait_blocking(key: str, timeout: float) -> dict[str, Any] | None:
    """The next message pushed on `key`, or None after `timeout` seconds (at most 4), blocking the
    calling thread: a web request's own thread (inspector/asgi_handler.py), which its caller loops
    on. A Redis outage is a None after a pause: the caller looks at the database between waits."""
    timeout = min(max(timeout, 0.01), _SOCKET_TIMEOUT - 1)
    try:
        item = _client().blpop([key], timeout=timeout)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        log.warning("waiting on %s: Redis is unavailable (%s)", key, exc)
        time.sleep(timeout)
        return None
    return None if item is None else json.loads(item[1])


_async_clients: dict[int, tuple[asyncio.AbstractEventLoop, aredis.Redis]] = {}


def _async_client() -> aredis.Redis:
    """One client per event loop (redis.asyncio connections belong to the loop that made them; a
    closed loop's id may be reused by a new loop, so the loop itself is compared)."""
    loop = asyncio.get_running_loop()
    made_on, client = _async_clients.get(id(loop), (None, None))
    if made_on is not loop:
        # No socket timeout: BLPOP's own timeout bounds every wait.
        client = aredis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=None, socket_connect_timeout=5)
        _async_clients[id(loop)] = (loop, client)
    return client


async def wait(key: str, timeout: float) -> dict[str, Any] | None:
    """The next message pushed on `key`, or None after `timeout` seconds.

    A Redis outage does not end the wait (it would end the live call waiting on it): it is tried
    again each second until `timeout`. A message pushed while Redis was down is lost with Redis."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    warned = False
    while (remaining := deadline - loop.time()) > 0:
        try:
            item = await _async_client().blpop([key], timeout=max(remaining, 0.01))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if not warned:
                log.warning("waiting on %s: Redis is unavailable (%s); trying again each second", key, exc)
                warned = True
            await asyncio.sleep(min(1.0, max(remaining, 0)))
            continue
        return None if item is None else json.loads(item[1])
    return None


FIRST_LOOK = 0.05  # seconds a call's Cancel watcher waits for an announcement before its first look
RECHECK = 30.0  # seconds between looks at the list while announced: an announcement lost to a Redis hiccup


class _Announcements:
    """One pub/sub subscription per event loop to `announcements()`, waking the waits on the keys it names."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.waiting: dict[str, set[asyncio.Future]] = {}
        self.subscribed = asyncio.Event()
        self.listener = asyncio.ensure_future(self._listen())

    async def _listen(self) -> None:
        warned = False
        while True:
            pubsub = _async_client().pubsub()
            try:
                await pubsub.subscribe(announcements())
                self.subscribed.set()
                self._wake_all()  # anything pushed while not subscribed is on its list
                warned = False
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self._wake(message["data"].decode())
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if not warned:
                    log.warning("listening for announced pushes: Redis is unavailable (%s); trying again each second", exc)
                    warned = True
            finally:
                self.subscribed.clear()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(1.0)

    def _wake(self, key: str) -> None:
        for woken in self.waiting.get(key, ()):
            if not woken.done():
                woken.set_result(None)

    def _wake_all(self) -> None:
        for key in list(self.waiting):
            self._wake(key)

    def forget(self, key: str, woken: asyncio.Future) -> None:
        """A wait on `key` ended (with or without a wake): nothing more to wake for it."""
        keyed = self.waiting.get(key)
        if keyed is not None:
            keyed.discard(woken)
            if not keyed:
                del self.waiting[key]


_announcements: dict[int, _Announcements] = {}


async def wait_announced(key: str, timeout: float, first_look: float = 0.0) -> dict[str, Any] | None:
    """`wait` for a key whose pushes are announced (`push(..., announce=True)`): the next message on
    `key`, or None after `timeout` seconds, without a blocking command of its own on Redis.

    `first_look`: seconds before the first look at the list; an announcement in them still wakes
    the wait at once. A call's Cancel watcher waits FIRST_LOOK, so a call that ends sooner, as
    nearly every call does, costs Redis nothing; a Cancel pushed before the watcher started is
    seen that much later."""
    loop = asyncio.get_running_loop()
    listening = _announcements.get(id(loop))
    if listening is None or listening.loop is not loop or listening.listener.done():
        listening = _announcements[id(loop)] = _Announcements()
    deadline = loop.time() + timeout
    warned = False
    if first_look > 0:
        woken = loop.create_future()
        listening.waiting.setdefault(key, set()).add(woken)
        try:
            await asyncio.wait({woken}, timeout=min(first_look, timeout))
        finally:
            listening.forget(key, woken)
    while (remaining := deadline - loop.time()) > 0:
        woken = loop.create_future()
        listening.waiting.setdefault(key, set()).add(woken)
        try:
            item = await _async_client().lpop(key)
            if item is not None:
                return json.loads(item)
            # Subscribed: the announcement wakes this (and a look every RECHECK s). Not yet, or Redis
            # away: a look each second, and the subscription's start wakes it too. Only asyncio.wait
            # here: Python 3.11's wait_for can swallow the cancel that ends this wait with its call.
            pause = RECHECK if listening.subscribed.is_set() else 1.0
            await asyncio.wait({woken}, timeout=min(remaining, pause))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if not warned:
                log.warning("waiting on %s: Redis is unavailable (%s); trying again each second", key, exc)
                warned = True
            await asyncio.sleep(min(1.0, max(deadline - loop.time(), 0)))
        finally:
            listening.forget(key, woken)
    return None


async def discard(key: str) -> None:
    """Forget anything left on `key` (a Cancel that came after the call ended)."""
    await _async_client().delete(key)


async def apush(key: str, message: dict[str, Any], ttl: int = _KEY_TTL) -> None:
    """`push` from an event loop (the pool's, the publisher's: never blocks it); one round trip."""
    async with _async_client().pipeline(transaction=False) as pipe:
        await pipe.rpush(key, json.dumps(message)).expire(key, ttl).execute()
