"""The Channels layer: channels_redis's, with one cost removed from publishing to nobody.

Most events go to groups nobody is in: a script's call has no page open, and a call's caller
groups are empty most of the time. channels_redis's `group_send` spends two round trips on each
such group (drop expired members, list the rest) before it finds nobody. `group_send_many` asks
for the members of every group in one pipelined round trip per Redis host, and hands only the
groups someone is in to channels_redis's own `group_send`. Measured with `publish_many` of one
event to two empty groups: 0.44 → 0.25 ms of the publishing process's CPU.

Its Redis connections also keep a cancelled receive cancelled (`cancel_safe_writes`): on
Python 3.11 a socket closed at the wrong moment left its consumer running until daphne killed it.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from typing import Any

import redis.asyncio.connection
import redis.exceptions
from channels_redis import core


class _CancelSafeWrite:
    """redis-py writes a command under `asyncio.wait_for(…, socket_timeout)`. Before Python 3.12,
    `wait_for` drops a cancellation that lands in the loop turn in which the write completes, and
    returns as if nothing happened (writes complete at once, so the window is wide). channels_redis
    cancels a socket's `receive` when the socket closes; the lost cancel leaves that receive running,
    and daphne kills the consumer 10 s later ("took too long to shut down"): 11 of 3,000 cancelled
    receives in a stress run, a few kills per run of bench/pipeline.py.

    This is redis-py 8's `AbstractConnection.send_packed_command` with `asyncio.timeout` where it
    has `wait_for` (the timeout is read, never changed: redis-py's maintenance notifications change
    it on a connection in use)."""

    async def send_packed_command(self, command, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect_check_health(check_health=False)
        if check_health:
            await self.check_health()
        try:
            if isinstance(command, str):
                command = command.encode()
            if isinstance(command, bytes):
                command = [command]
            async with asyncio.timeout(self.socket_timeout or None):
                self._writer.writelines(command)
                await self._writer.drain()
        except TimeoutError:  # the builtin, as asyncio's is on 3.11 (and an OSError: caught first)
            await self.disconnect(nowait=True)
            raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            err_no, message = exc.args[:2] if len(exc.args) >= 2 else ("UNKNOWN", exc.args[0] if exc.args else exc)
            raise redis.exceptions.ConnectionError(f"Error {err_no} while writing to socket. {message}.") from exc
        except BaseException:
            await self.disconnect(nowait=True)  # a write cut short: the connection cannot be reused
            raise


@functools.cache
def cancel_safe_writes(connection_class: type) -> type:
    """`connection_class` (plain, TLS, Unix socket: whichever the URL chose) writing as above."""
    if sys.version_info >= (3, 12) or not issubclass(connection_class, redis.asyncio.connection.AbstractConnection):
        return connection_class  # Python 3.12's wait_for keeps a cancellation
    return type(f"CancelSafe{connection_class.__name__}", (_CancelSafeWrite, connection_class), {})


class RedisChannelLayer(core.RedisChannelLayer):
    def create_pool(self, index: int):
        pool = super().create_pool(index)
        pool.connection_class = cancel_safe_writes(pool.connection_class)
        return pool

    async def group_send_many(self, groups: list[str], message: dict[str, Any]) -> None:
        """`group_send` to each of `groups`, skipping the empty ones in one round trip.

        Every group's members are read before anything is sent: with several Redis hosts, one
        that fails stops the sends to groups on the others too (one host is the usual set-up)."""
        by_host: dict[int, list[str]] = {}
        for group in groups:
            assert self.require_valid_group_name(group), "Group name not valid"
            by_host.setdefault(self.consistent_hash(group), []).append(group)
        cutoff = int(time.time()) - self.group_expiry
        listened: list[str] = []
        for index, host_groups in by_host.items():
            pipe = self.connection(index).pipeline(transaction=False)
            for group in host_groups:
                key = self._group_key(group)
                pipe.zremrangebyscore(key, min=0, max=cutoff)  # as group_send does first
                pipe.zrange(key, 0, -1)
            replies = await pipe.execute()
            listened += [group for group, members in zip(host_groups, replies[1::2]) if members]
        for group in listened:
            await self.group_send(group, message)  # reads the members again: the one path that sends
