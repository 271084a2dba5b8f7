"""The Channels layer skips groups nobody is in (inspector/channel_layer.py), and still reaches
every socket of the groups someone is in: through real channels_redis on the run's Redis."""

from __future__ import annotations

import asyncio

import redis.asyncio
from channels.layers import get_channel_layer

from tests.helpers import run_async


async def _received(layer, channel, timeout: float):
    try:
        return await asyncio.wait_for(layer.receive(channel), timeout)
    except asyncio.TimeoutError:
        return None


def _counting_sends(layer) -> list[str]:
    """This test's groups the layer's own `group_send` is called for, from now on (undone by `del
    layer.group_send`). Only `layer-test.` ones: the layer is the process's, and another thread
    may publish on it meanwhile."""
    sent_to: list[str] = []
    stock_send = layer.group_send

    async def counted(group, message):
        if group.startswith("layer-test."):
            sent_to.append(group)
        await stock_send(group, message)

    layer.group_send = counted
    return sent_to


def test_group_send_many_reaches_every_listened_group_and_sends_to_no_empty_one():
    async def scenario():
        layer = get_channel_layer()
        sent_to = _counting_sends(layer)
        first, second = await layer.new_channel(), await layer.new_channel()
        joined = [("layer-test.a", first), ("layer-test.c", first), ("layer-test.c", second)]
        try:
            for group, channel in joined:
                await layer.group_add(group, channel)
            groups = ["layer-test.empty-1", "layer-test.a", "layer-test.empty-2", "layer-test.c"]
            await layer.group_send_many(groups, {"type": "relay", "event": {"n": 1}})
            got_first = [await _received(layer, first, 5) for _ in range(2)]
            got_second = await _received(layer, second, 5)
            # Nothing more is waiting: one message per group a channel is in.
            extra = [await _received(layer, first, 0.3), await _received(layer, second, 0.3)]
            return list(sent_to), got_first, got_second, extra
        finally:
            del layer.group_send
            for group, channel in joined:
                await layer.group_discard(group, channel)

    sent_to, got_first, got_second, extra = run_async(scenario)
    assert sent_to == ["layer-test.a", "layer-test.c"]
    assert [m and m["event"] for m in got_first] == [{"n": 1}, {"n": 1}]
    assert got_second and got_second["event"] == {"n": 1}
    assert extra == [None, None]


def test_a_member_past_the_group_expiry_is_dropped_as_channels_redis_drops_it():
    async def scenario():
        layer = get_channel_layer()
        sent_to = _counting_sends(layer)
        channel = await layer.new_channel()
        key = layer._group_key("layer-test.old")
        connection = layer.connection(layer.consistent_hash("layer-test.old"))
        try:
            # Joined longer ago than the group expiry: channels_redis would drop it before sending.
            await connection.zadd(key, {channel: 1})
            await layer.group_send_many(["layer-test.old"], {"type": "relay", "event": {}})
            members = await connection.zrange(key, 0, -1)
            return list(sent_to), members, await _received(layer, channel, 0.3)
        finally:
            del layer.group_send
            await connection.delete(key)

    sent_to, members, received = run_async(scenario)
    assert sent_to == []  # nobody left in it: not even one send
    assert members == []
    assert received is None


def test_a_cancelled_redis_command_stays_cancelled_in_whichever_loop_turn_the_cancel_lands():
    """A socket's close cancels its consumer's `receive`, which may be writing a command to Redis at
    that moment. Before Python 3.12, `asyncio.wait_for` (redis-py's write timeout) dropped a cancel
    landing in the turn the write completed: the receive ran on, and daphne killed the consumer 10 s
    later. The cancel is tried at every turn of a write through the layer's own connections, a small
    one (done at once) and a 4 MB one (drained over several turns when the socket's buffers make it
    wait): each cancel either comes after the command ended (refused) or ends it, and a write it cut
    short leaves its connection closed."""

    big = "x" * (4 * 1024 * 1024)

    async def scenario():
        pool = get_channel_layer().create_pool(0)
        lost, reusable = [], []
        try:
            for name, args in (("small", ("PING",)), ("large", ("SET", "layer-test.big", big))):
                for turns in range(40):
                    connection = await pool.get_connection()
                    try:
                        command = asyncio.ensure_future(connection.send_packed_command(connection.pack_command(*args)))
                        for _ in range(turns):
                            await asyncio.sleep(0)
                        asked = command.cancel()
                        try:
                            await command
                        except asyncio.CancelledError:
                            if turns and connection.is_connected:  # (at turn 0 it never started)
                                reusable.append((name, turns))  # half a command on a live connection
                            continue
                        if asked:
                            lost.append((name, turns))  # cancelled, yet it carried on as if not
                    finally:
                        await connection.disconnect()
                        await pool.release(connection)
        finally:
            await redis.asyncio.Redis(connection_pool=pool).delete("layer-test.big")  # 4 MB not left behind
            await pool.aclose()
        return lost, reusable

    lost, reusable = run_async(scenario)
    # (Whether a cancel lands mid-write depends on the kernel's socket buffers: in CI the 4 MB went
    # out in one turn. The stock connection's lost cancels show at turns 1-3 either way.)
    assert lost == []
    assert reusable == []
