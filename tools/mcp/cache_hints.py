"""Cache hints on results (2026-07-28, SEP-2549 "Caching"): `ttlMs` and `cacheScope`.

A 2026-07-28 server puts them on `tools/list`, `prompts/list`, `resources/list`,
`resources/templates/list` and `resources/read` results (and `server/discover`): `ttlMs` is how
long, in milliseconds, the client MAY consider the result fresh (like HTTP `max-age`; absent
means 0, stale at once); `cacheScope` says whether the result may be shared by every caller
(`"public"`) or belongs to one authorization context (`"private"`). For a paginated list the
shortest page TTL wins and one private page makes the list private. Older protocol versions send
neither, so nothing is ever fresh there. The `mcp` SDK's own response cache (`Client(cache=…)`) is
not used: the inspector shows what the server sent and keeps what it listed in its database
(tools/runtime/result_cache.py honours these hints there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PUBLIC, PRIVATE = "public", "private"


@dataclass(frozen=True)
class CacheHint:
    """How long a result stays fresh (ms) and for whom."""

    ttl_ms: int = 0
    scope: str = PRIVATE

    @classmethod
    def of(cls, result: Any) -> CacheHint:
        """The hint a raw result carries: a missing or malformed `ttlMs` is 0, and any `cacheScope`
        but `"public"` is private (the safe reading of what a server did not say clearly)."""
        if not isinstance(result, dict):
            return cls()
        ttl = result.get("ttlMs")
        ttl = ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else 0
        return cls(ttl, PUBLIC if result.get("cacheScope") == PUBLIC else PRIVATE)

    def combine(self, other: CacheHint) -> CacheHint:
        """The hint of two pages of one list: the shorter TTL, private if either page is."""
        return CacheHint(min(self.ttl_ms, other.ttl_ms), PUBLIC if self.scope == other.scope == PUBLIC else PRIVATE)


@dataclass
class Listing:
    """Every item of a paginated list, and the hint of the whole list."""

    items: list[dict[str, Any]]
    hint: CacheHint
