"""The Channels layer skips groups nobody is in (inspector/channel_layer.py), and still reaches
every socket of the groups someone is in: through real channels_redis on the run's Redis."""

from __future__ import annotations

import asyncio

from channels.layers import get_channel_layer

from tests.helpers import run_async


def test_group_send_many_reaches_every_listened_group_and_sends_to_no_empty_one():
    async def scenario():
        layer = get_channel_layer()
        sent_to: list[str] = []
        stock_send = layer.group_send

        async def counted(group, message):
            sent_to.append(group)
            await stock_send(group, message)

        layer.group_send = counted
        first, second = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("layer-test.a", first)
        await layer.group_add("layer-test.c", first)
        await layer.group_add("layer-test.c", second)
        groups = ["layer-test.empty-1", "layer-test.a", "layer-test.empty-2", "layer-test.c"]
        await layer.group_send_many(groups, {"type": "relay", "event": {"n": 1}})
        got_first = [await asyncio.wait_for(layer.receive(first), 5) for _ in range(2)]
        got_second = await asyncio.wait_for(layer.receive(second), 5)
        # Nothing more is waiting: one message per group the channel is in.
        extra = None
        try:
            extra = await asyncio.wait_for(layer.receive(first), 0.3)
        except asyncio.TimeoutError:
            pass
        for group in ("layer-test.a", "layer-test.c"):
            await layer.group_discard(group, first)
        await layer.group_discard("layer-test.c", second)
        return sent_to, got_first, got_second, extra

    sent_to, got_first, got_second, extra = run_async(scenario)
    assert sent_to == ["layer-test.a", "layer-test.c"]
    assert [m["event"] for m in got_first] == [{"n": 1}, {"n": 1}]
    assert got_second["event"] == {"n": 1}
    assert extra is None


def test_a_member_past_the_group_expiry_is_dropped_as_channels_redis_drops_it():
    async def scenario():
        layer = get_channel_layer()
        sent_to: list[str] = []
        stock_send = layer.group_send

        async def counted(group, message):
            sent_to.append(group)
            await stock_send(group, message)

        layer.group_send = counted
        channel = await layer.new_channel()
        await layer.group_add("layer-test.old", channel)
        # Joined longer ago than the group expiry: channels_redis would drop it before sending.
        connection = layer.connection(layer.consistent_hash("layer-test.old"))
        await connection.zadd(layer._group_key("layer-test.old"), {channel: 1})
        await layer.group_send_many(["layer-test.old"], {"type": "relay", "event": {}})
        members = await connection.zrange(layer._group_key("layer-test.old"), 0, -1)
        try:
            received = await asyncio.wait_for(layer.receive(channel), 0.3)
        except asyncio.TimeoutError:
            received = None
        return sent_to, members, received

    sent_to, members, received = run_async(scenario)
    assert sent_to == []  # nobody left in it: not even one send
    assert members == []
    assert received is None
