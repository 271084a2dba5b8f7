"""A worker's wait for a Cancel (tools/runtime/waits.py `wait_announced`): a push before the wait,
during it, or none at all, on the real Redis; and waits that end without a Cancel, as nearly
every call does, make no new Redis connection (a cancelled BLPOP made one per call)."""

from __future__ import annotations

import asyncio
import uuid

import redis.asyncio.client
import redis.asyncio.connection

from tests.helpers import run_async
from tools.runtime import waits


def test_an_announced_push_reaches_its_wait_whenever_it_was_sent():
    before, during, never = (waits.cancel_key(uuid.uuid4()) for _ in range(3))
    waits.push(before, {"reason": "early"}, announce=True)

    async def scenario():
        assert await waits.wait_announced(before, 5) == {"reason": "early"}
        waiting = asyncio.ensure_future(waits.wait_announced(during, 20))
        await asyncio.sleep(0.3)
        await asyncio.to_thread(waits.push, during, {"reason": "now"}, announce=True)
        started = asyncio.get_running_loop().time()
        assert await waiting == {"reason": "now"}
        woke_in = asyncio.get_running_loop().time() - started
        assert await waits.wait_announced(never, 0.5) is None
        return woke_in

    assert run_async(scenario) < waits.RECHECK  # woken by the announcement, not by the next look


def test_waits_ended_without_a_cancel_make_no_new_connection(monkeypatch):
    made = []
    connect = redis.asyncio.connection.Connection._connect  # every new socket of redis.asyncio

    async def counted(self):
        made.append(self)
        await connect(self)

    monkeypatch.setattr(redis.asyncio.connection.Connection, "_connect", counted)

    async def calls(wait, n: int) -> None:
        await waits.wait_announced(waits.cancel_key(uuid.uuid4()), 0.2)  # connects and subscribes once
        before = len(made)
        for _ in range(n):  # a call's watcher: waiting while the call runs, cancelled when it ends
            watcher = asyncio.ensure_future(wait(waits.cancel_key(uuid.uuid4()), 30))
            await asyncio.sleep(0.02)
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await waits.wait_announced(waits.cancel_key(uuid.uuid4()), 0.05)
        return len(made) - before

    assert run_async(calls, waits.wait_announced, 20) == 0


def test_a_wait_ends_when_its_call_cancels_it_even_as_the_subscription_starts():
    """A call's `finally` awaits its cancelled watcher: a wait that outlived its cancel held the
    call until the Cancel wait's own timeout. The first wait of an event loop is the one that meets
    the subscription starting, so each try is on a new loop, cancelled at a different moment."""

    async def cancelled_after(delay: float) -> bool:
        watcher = asyncio.ensure_future(waits.wait_announced(waits.cancel_key(uuid.uuid4()), 60))
        await asyncio.sleep(delay)
        watcher.cancel()
        done, _ = await asyncio.wait({watcher}, timeout=10)
        return bool(done) and watcher.cancelled()

    for step in range(25):
        assert run_async(cancelled_after, step * 0.002), f"the wait outlived its cancel (after {step * 2} ms)"


def test_a_call_that_ends_within_the_first_look_asks_redis_nothing(monkeypatch):
    """The Cancel watcher's first look waits FIRST_LOOK: a call ending sooner sends no LPOP; a
    Cancel pushed before the watcher began is still found, at the first look; one announced
    during the first look wakes it at once."""
    looked = []
    execute = redis.asyncio.client.Redis.execute_command

    async def counted(self, *args, **options):
        if args and args[0] == "LPOP":
            looked.append(args[1])
        return await execute(self, *args, **options)

    monkeypatch.setattr(redis.asyncio.client.Redis, "execute_command", counted)
    early, during = waits.cancel_key(uuid.uuid4()), waits.cancel_key(uuid.uuid4())
    waits.push(early, {"reason": "early"}, announce=True)

    async def scenario():
        loop = asyncio.get_running_loop()
        await waits.wait_announced(waits.cancel_key(uuid.uuid4()), 0.2)  # subscribes this loop
        before = len(looked)
        for _ in range(5):  # calls that end within the first look
            watcher = asyncio.ensure_future(waits.wait_announced(waits.cancel_key(uuid.uuid4()), 30, first_look=0.5))
            await asyncio.sleep(0.02)
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        quiet = len(looked) - before
        started = loop.time()
        found = await waits.wait_announced(early, 30, first_look=0.3)
        found_after = loop.time() - started
        waiting = asyncio.ensure_future(waits.wait_announced(during, 30, first_look=5))
        await asyncio.sleep(0.1)
        started = loop.time()
        await asyncio.to_thread(waits.push, during, {"reason": "now"}, announce=True)
        return quiet, found, found_after, await waiting, loop.time() - started

    quiet, found, found_after, woken, woken_after = run_async(scenario)
    assert quiet == 0
    assert found == {"reason": "early"} and 0.3 <= found_after < 5
    assert woken == {"reason": "now"} and woken_after < 2  # not the 5 s first look
