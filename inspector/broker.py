"""Celery's Redis transport, with one defect fixed and one cost removed.

The defect: a Redis restart during a task killed the worker.

When Redis goes away while a worker holds an unacknowledged message (every running call: tasks
are `acks_late`), Celery closes the broken connection twice: `collect()` first tears down the
transport (its `client` becomes None) after the channel's own close failed on the dead socket,
then `close()` closes the channel again, which tries to put the unacknowledged message back and
builds a Redis connection pool from `self.connection.client.hostname`: an `AttributeError`, not a
connection error, so nothing catches it and the worker stops with "Unrecoverable error:
AttributeError("'NoneType' object has no attribute 'hostname'")" (kombu 5.x, celery 5.x).

Here that second attempt raises the connection error it is: Celery ignores it, reconnects, and
the running call finishes and is stored as usual. The message is not put back, and need not be:
a call's state lives in its database row (the sweep sends a still-queued call's task again, and a
redelivered task never runs a finished call twice).

The cost: kombu's channel builds a new redis-py client for every publish, acknowledgement and
requeue (`Channel.conn_or_acquire`), and redis-py 8's constructor is not cheap (an event
dispatcher, locks, retry objects). A client over the channel's connection pool is thread-safe
(each command takes a connection of the pool), so here one client per pool serves them all.

Selected by `CELERY_BROKER_TRANSPORT` (inspector/settings.py) for `redis://` and `rediss://` URLs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    _shared_client = None

    @contextmanager
    def conn_or_acquire(self, client=None) -> Iterator:
        if client:
            yield client
            return
        shared = self._shared_client
        # A lost connection makes the channel drop its pool (`_disconnect_pools`): a client of
        # the old pool is not reused.
        if shared is None or shared.connection_pool is not self.pool:
            shared = self._shared_client = self._create_client()
        yield shared

    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection.client is None:
            raise RedisConnectionError("The broker connection is already closed.")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
