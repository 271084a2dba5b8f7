"""PostgreSQL cannot store U+0000: a text value may not contain it and jsonb refuses the
`\\u0000` escape. Anything a server, a model or a person sends may hold one (a C string, binary
data read as text), and refusing the write would lose the result and leave the call to the
sweep. So on PostgreSQL every string parameter and every JSON value is written with U+0000
replaced by U+FFFD, the replacement character; SQLite stores them as they are. (The JSON API
refuses a NUL in a request body with a clear 400 first: inspector/api.py.)

`install()` registers psycopg dumpers that do it, before the first connection (the app's
ready()); `json_text()` does it for JSON text written as it is (tools/runtime/stored_result.py).
"""

from __future__ import annotations

import re
from typing import Any

NUL, REPLACEMENT = "\x00", "\ufffd"
# A `\u0000` escape, not an escaped backslash followed by `u0000`: preceded by an even number of backslashes.
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
_ESCAPED_NUL_BYTES = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def text(value: str) -> str:
    """`value` with U+0000 replaced (a scan, no copy, when there is none)."""
    return value.replace(NUL, REPLACEMENT) if NUL in value else value


def json_text(value: str) -> str:
    """JSON text with every `\\u0000` escape replaced by `\\ufffd`."""
    return _ESCAPED_NUL.sub(r"\1\\ufffd", value) if "\\u0000" in value else value


def json_bytes(data: bytes) -> bytes:
    """UTF-8 JSON text with every `\\u0000` escape replaced by `\\ufffd`."""
    return _ESCAPED_NUL_BYTES.sub(rb"\1\\ufffd", data) if b"\\u0000" in data else data


def _json_bytes(data: Any) -> Any:
    if isinstance(data, bytes | bytearray) and b"\\u0000" in data:
        return json_bytes(bytes(data))
    return data


def install() -> None:
    """Idempotent: psycopg's global adapters, which every Django connection's adapters extend."""
    import psycopg
    from psycopg.adapt import Dumper, PyFormat
    from psycopg.types.json import Jsonb, JsonbBinaryDumper, JsonbDumper

    if getattr(psycopg.adapters, "_inspector_nul_free", False):
        return

    def str_dumper(inner_cls: type) -> type:
        class NulFreeStrDumper(Dumper):
            """psycopg's own (C) dumper for str, given the value with U+0000 replaced."""

            format = inner_cls.format
            oid = inner_cls.oid

            def __init__(self, cls: type, context: Any = None) -> None:
                super().__init__(cls, context)
                self._inner = inner_cls(cls, context)

            def dump(self, obj: str) -> Any:
                return self._inner.dump(text(obj))

            def quote(self, obj: str) -> Any:
                return self._inner.quote(text(obj))

        return NulFreeStrDumper

    class NulFreeJsonbDumper(JsonbDumper):
        def dump(self, obj: Any) -> Any:
            return _json_bytes(super().dump(obj))

    class NulFreeJsonbBinaryDumper(JsonbBinaryDumper):
        def dump(self, obj: Any) -> Any:
            return _json_bytes(super().dump(obj))

    text_dumper = str_dumper(psycopg.adapters.get_dumper(str, PyFormat.TEXT))
    binary_dumper = str_dumper(psycopg.adapters.get_dumper(str, PyFormat.BINARY))
    # Registered in this order, as psycopg registers its own: the last one is the default.
    psycopg.adapters.register_dumper(str, binary_dumper)
    psycopg.adapters.register_dumper(str, text_dumper)
    psycopg.adapters.register_dumper(Jsonb, NulFreeJsonbBinaryDumper)
    psycopg.adapters.register_dumper(Jsonb, NulFreeJsonbDumper)
    psycopg.adapters._inspector_nul_free = True
