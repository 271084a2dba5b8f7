"""The Channels layer: channels_redis's, with one cost removed from publishing to nobody.

Most events go to groups nobody is in: a script's call has no page open, and a call's caller
groups are empty most of the time. channels_redis's `group_send` spends two round trips on each
such group (drop expired members, list the rest) before it finds nobody. `group_send_many` asks
for the members of every group in one pipelined round trip per Redis host, and hands only the
groups someone is in to channels_redis's own `group_send`. Measured with `publish_many` of one
event to two empty groups: 0.44 → 0.25 ms of the publishing process's CPU.
"""

from __future__ import annotations

import time
from typing import Any

from channels_redis import core


class RedisChannelLayer(core.RedisChannelLayer):
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
