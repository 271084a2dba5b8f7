"""Celery's Redis transport, with one defect fixed: a Redis restart during a task killed the worker.

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

Selected by `CELERY_BROKER_TRANSPORT` (inspector/settings.py) for `redis://` and `rediss://` URLs.
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection.client is None:
            raise RedisConnectionError("The broker connection is already closed.")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
