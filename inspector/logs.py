"""What each log line carries: the call, turn and task it belongs to, and optionally JSON.

Operators follow one tool call through the web process, the worker and the MCP server by its id:
every line logged while a worker runs a call (or an LLM step) carries `call_id` (or `turn_id`),
whatever module logs it. `LOG_FORMAT=json` writes one JSON object a line for a log collector.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

FIELDS = ("call_id", "turn_id")
_context: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("log_context", default={})


@contextmanager
def context(**fields: object) -> Iterator[None]:
    """Lines logged inside carry these fields (None values are left out)."""
    token = _context.set({**_context.get(), **{k: str(v) for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    """Puts the current context's fields on each record (set on the handler, so every logger gets them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _context.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class PlainFormatter(logging.Formatter):
    """The usual line, with ` [call_id=…]` at the end when the line belongs to a call or a turn."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        tags = " ".join(f"{k}={getattr(record, k)}" for k in FIELDS if hasattr(record, k))
        return f"{line} [{tags}]" if tags else line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": self.formatTime(record), "level": record.levelname, "logger": record.name,
            "message": record.getMessage(), "process": record.process,
        }
        for key in FIELDS:
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)
