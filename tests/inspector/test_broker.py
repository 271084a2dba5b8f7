"""Celery's broker transport (inspector/broker.py) uses one redis-py client per connection pool
for its publishes and acknowledgements, and a new one once the pool was dropped."""

from __future__ import annotations

from inspector.broker import Channel
from inspector.celery import app


def test_the_broker_channel_reuses_its_client_until_its_pool_is_dropped():
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        assert isinstance(channel, Channel)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.ping()
        channel._disconnect_pools()  # what a lost connection does
        with channel.conn_or_acquire() as third:
            assert third is not first
            assert third.connection_pool is channel.pool
            assert third.ping()
        given = object()
        with channel.conn_or_acquire(given) as passed:
            assert passed is given
