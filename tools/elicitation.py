"""What an elicitation answer holds besides what the person typed (Django-free: the
conformance client uses it too, conformance/client.py)."""

from __future__ import annotations

from typing import Any


def with_defaults(schema: Any, content: dict[str, Any]) -> dict[str, Any]:
    """SEP-1034: a field the answer leaves out takes the default the server's schema gives it."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    filled = dict(content)
    for name, prop in (properties or {}).items() if isinstance(properties, dict) else ():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled
