"""Keeping JSON-RPC frames small: a bounded preview of a large frame, measured without copying it.

A 40 MB tool result used to be stored three times (the result row, the projection, and the
frame) and pushed whole to every open JSON-RPC log page. The full result is already stored
with its tool call, so the log keeps the frame's envelope (ids, method, keys) with long strings
and lists cut, plus its real size. Sizes are measured by walking the message, never by
serialising it: a 40 MB frame must not cost another 40 MB string in the worker.
"""

from __future__ import annotations

import json
from typing import Any

from tools.mcp.wire_result import LargeJSON, WireResult, total_chars

PREVIEW_STRING = 1024  # characters kept of a long string
PREVIEW_ITEMS = 20  # items kept of a long list or object
PREVIEW_DEPTH = 8


def wire_size(value: Any, stop_above: int | None = None) -> int:
    """The size in bytes of `value` as compact JSON: exact for ASCII text, close otherwise.

    With `stop_above`, the walk stops as soon as the size is known to exceed it (the answer is
    then some number above `stop_above`), so deciding "is this frame large?" costs little.
    """
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += getattr(item, "wire_bytes", len(item) + 2)  # a LongText: its size as sent
        elif isinstance(item, LargeJSON):
            total += item.wire_bytes
        elif isinstance(item, dict):
            total += 2 + max(len(item) - 1, 0)
            for key, child in item.items():
                total += len(str(key)) + 3
                stack.append(child)
        elif isinstance(item, list | tuple):
            total += 2 + max(len(item) - 1, 0)
            stack.extend(item)
        elif item is None or isinstance(item, bool):
            total += 4 if item is not False else 5
        else:
            total += len(json.dumps(item))
        if stop_above is not None and total > stop_above:
            return total
    return total


def preview(value: Any, depth: int = 0) -> Any:
    """A copy of `value` with long strings and lists cut, each cut saying how much it left out."""
    if isinstance(value, str):
        if total_chars(value) <= PREVIEW_STRING:
            return str(value)
        return f"{value[:PREVIEW_STRING]}… [{total_chars(value) - PREVIEW_STRING:,} more characters not stored in the log]"
    if isinstance(value, LargeJSON):
        return f"[{value.kind} of {value.wire_bytes:,} bytes not stored in the log]"
    if depth >= PREVIEW_DEPTH and isinstance(value, dict | list):
        return f"[{type(value).__name__} of {len(value)} items not stored in the log]"
    if isinstance(value, dict):
        out = {k: preview(v, depth + 1) for k, v in list(value.items())[:PREVIEW_ITEMS]}
        if len(value) > PREVIEW_ITEMS:
            out["…"] = f"{len(value) - PREVIEW_ITEMS:,} more keys not stored in the log"
        return out
    if isinstance(value, list):
        out = [preview(v, depth + 1) for v in value[:PREVIEW_ITEMS]]
        if len(value) > PREVIEW_ITEMS:
            out.append(f"… {len(value) - PREVIEW_ITEMS:,} more items not stored in the log")
        return out
    return value


def for_storage(message: dict[str, Any], limit: int) -> tuple[dict[str, Any], int, bool]:
    """(payload to store, size in bytes, whether the payload is a preview) for one frame."""
    # A large result read lean (tools/mcp/wire_result.py) is never held whole: always a preview.
    if not isinstance(message.get("result"), WireResult) and wire_size(message, stop_above=limit) <= limit:
        return message, len(json.dumps(message, ensure_ascii=False).encode()), False
    return preview(message), wire_size(message), True
