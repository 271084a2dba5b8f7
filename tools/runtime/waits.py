"""Waiting across processes on Redis: a worker waits for what a web request sends it.

Three waits exist. A script that started a call may wait for its end (`ended_key`, pushed
when the call's final event goes out). A worker holding a live call waits for the answer to a server's request
(`answer_key`), and for a Cancel of the call (`cancel_key`). Web views `push` one JSON message
onto the key; the worker `wait`s with BLPOP, bounded by the call's remaining time. A list, not
pub/sub: a message pushed a moment before the worker starts waiting is not lost.

The worker side is async (it runs on the MCP pool's event loop, which must never block); the
web side is a plain synchronous push.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
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
_sync_lock = threading.Lock()


def push(key: str, message: dict[str, Any], ttl: int = _KEY_TTL) -> None:
    """Hand `message` to whoever waits on `key` (now or within `ttl` seconds)."""
    global _sync_client
    with _sync_lock:
        if _sync_client is None:
            _sync_client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5, socket_connect_timeout=5)
        client = _sync_client
    pipe = client.pipeline()
    pipe.rpush(key, json.dumps(message))
    pipe.expire(key, ttl)
    pipe.execute()


_async_clients: dict[int, aredis.Redis] = {}


def _async_client() -> aredis.Redis:
    """One client per event loop (redis.asyncio connections belong to the loop that made them)."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(id(loop))
    if client is None:
        # No socket timeout: BLPOP's own timeout bounds every wait.
        client = aredis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=None, socket_connect_timeout=5)
        _async_clients[id(loop)] = client
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


async def discard(key: str) -> None:
    """Forget anything left on `key` (a Cancel that came after the call ended)."""
    await _async_client().delete(key)


async def apush(key: str, message: dict[str, Any]) -> None:
    """`push` from the pool's loop (never blocks it)."""
    client = _async_client()
    await client.rpush(key, json.dumps(message))
    await client.expire(key, _KEY_TTL)
