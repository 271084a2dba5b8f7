"""LLM-facing tool names: `<server>__<tool>`, within every provider's limits, and mapped back exactly.

Providers accept `^[a-zA-Z0-9_-]{1,64}$`. Sanitising can make two names equal or too long,
so a short hash of the original pair keeps them distinct and stable between steps.
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def _clean(text: str) -> str:
    return _INVALID.sub("_", text).strip("_") or "x"


def _digest(server_key: str, tool: str) -> str:
    return hashlib.sha1(f"{server_key}\0{tool}".encode()).hexdigest()[:8]


def assign(pairs: list[tuple[str, str, str]]) -> dict[str, tuple[str, str]]:
    """Map LLM names to (server_key, tool_name), for pairs of (server_key, server_name, tool_name).

    Deterministic: the same pairs always give the same names.
    """
    names: dict[str, tuple[str, str]] = {}
    for server_key, server_name, tool in sorted(pairs, key=lambda p: (p[1], p[2], p[0])):
        base = f"{_clean(server_name)}__{_clean(tool)}"
        name = base
        if len(base) > MAX_LEN or base in names:
            suffix = "_" + _digest(server_key, tool)
            name = base[: MAX_LEN - len(suffix)] + suffix
        candidate, n = name, 2
        while candidate in names:  # a hash collision, or the same pair listed twice
            suffix = f"_{n}"
            candidate, n = name[: MAX_LEN - len(suffix)] + suffix, n + 1
        names[candidate] = (server_key, tool)
    return names
