"""A large tool result kept as the bytes the server sent: stored as they are, never parsed whole.

Why: parsed into Python objects, a result costs the worker many times its size. A 40 MB text
cost +240-280 MB of RSS (the line, its decoded text, the parsed string, one serialisation for
storage, the driver's copy); a 52 MB structuredContent of 870,000 rows cost +600 MB, and most
of it stayed with the process. The full result is only ever stored and served, so above
`LARGE_BYTES` a `tools/call` or `tasks/result` answer is read lean instead:

- `msgspec` checks the whole frame is valid JSON and hands out the `result` as a view of the
  frame's bytes (`msgspec.Raw`, no copy). That view is what is stored (tools/runtime/stored_result.py
  writes it in pieces), so the stored result is byte for byte what the server sent.
- What the pipeline looks at (projection, outputSchema, input rounds) gets a `WireResult`: a
  dict of the result's members, decoded, except large ones: a large member other than
  `content` (`structuredContent`, `_meta`) stays a `LargeJSON` view, and a content block's long
  `text` becomes a `LongText`, which holds only its first `PREFIX_CHARS` characters and knows its
  full length and an estimate of its tokens (the model is never sent more than a prefix of it).

Anything msgspec refuses (invalid JSON, a lone surrogate escape) takes the ordinary path.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

import msgspec

from tools.mcp import tokens

LARGE_BYTES = 1024 * 1024  # a response frame at least this big is read lean
SMALL_BYTES = 64 * 1024  # a member, block or field at most this big is decoded as usual
PREFIX_CHARS = 2_000_000  # what a LongText keeps (tools/runtime/projection.py MAX_WINDOW_CHARS)
PIECE_BYTES = 1024 * 1024  # a long string is decoded this many bytes at a time
LEAN_METHODS = frozenset({"tools/call", "tasks/result"})


class Envelope(msgspec.Struct):
    """The JSON-RPC members of a frame; `result` stays bytes."""

    jsonrpc: str = ""
    id: int | str | None = None
    method: str | None = None
    result: msgspec.Raw = msgspec.Raw()  # empty: absent
    error: msgspec.Raw = msgspec.Raw()


class LargeJSON:
    """A JSON value too large to decode here, as the bytes it was sent as."""

    __slots__ = ("raw",)

    def __init__(self, raw: msgspec.Raw) -> None:
        self.raw = raw

    @property
    def wire_bytes(self) -> int:
        return len(self.raw)

    @property
    def kind(self) -> str:
        first = bytes(memoryview(self.raw)[:1])
        return {b"{": "object", b"[": "array", b'"': "string"}.get(first, "value")

    def decode(self) -> Any:
        """The value itself: as costly as parsing it ever was; for the rare paths that need it."""
        return _decode(self.raw)

    def __repr__(self) -> str:
        return f"<LargeJSON {self.kind} of {self.wire_bytes:,} bytes>"


class LongText(str):
    """A string whose value is the first `PREFIX_CHARS` characters of a longer one.

    `total_chars` is the full length; `estimate_tokens(model)` is what tools/mcp/tokens.py
    `estimate()` would say of the whole text (the same evenly spaced samples, taken while the
    text was decoded piece by piece). Slicing or formatting it gives plain strings of the
    prefix: only code that knows it (tools/runtime/projection.py, tools/mcp/frames.py) should see one.
    """

    total_chars: int
    wire_bytes: int
    samples: tuple[str, ...]
    blank: bool  # the whole text is whitespace (its prefix may be, and the rest not)
    parts: tuple[str, ...] = ()  # of a concatenation (concat())

    def __new__(cls, prefix: str, total_chars: int, wire_bytes: int, samples: tuple[str, ...],
                blank: bool = False) -> LongText:
        text = super().__new__(cls, prefix)
        text.total_chars, text.wire_bytes, text.samples, text.blank = total_chars, wire_bytes, samples, blank
        return text

    def __getnewargs__(self) -> tuple[Any, ...]:  # copy and pickle
        return str(self), self.total_chars, self.wire_bytes, self.samples, self.blank

    @classmethod
    def concat(cls, parts: list[str], separator: str) -> LongText:
        """`separator.join(parts)` where some part is a LongText; its token estimate is the sum of
        the parts' (the samples of a part cannot be placed in the whole)."""
        pieces: list[str] = []
        for i, part in enumerate(parts):
            pieces.extend((separator, part) if i else (part,))
        prefix, have = [], 0
        for piece in pieces:
            if have >= PREFIX_CHARS:
                break
            prefix.append(piece[:PREFIX_CHARS - have])
            have += len(prefix[-1])
        text = cls("".join(prefix), sum(total_chars(p) for p in pieces), sum(getattr(p, "wire_bytes", len(p)) for p in pieces), (),
                   blank=all(is_blank(p) for p in pieces))
        text.parts = tuple(pieces)
        return text

    def estimate_tokens(self, model: str | None = None) -> int:
        if self.parts:
            return sum(p.estimate_tokens(model) if isinstance(p, LongText) else tokens.estimate(p, model)
                       for p in self.parts)
        if self.total_chars == len(self):  # short enough to be held whole after all
            return tokens.estimate(str(self), model)
        return tokens.extrapolate(self.samples, self.total_chars, model)

    @classmethod
    def from_literal(cls, raw: msgspec.Raw) -> LongText:
        """Decode a JSON string literal piece by piece: its length, prefix and samples."""
        pieces = list(_string_pieces(memoryview(raw)[1:-1]))
        # Decoded twice, a piece at a time: once for the length the samples are spaced by, then
        # for the prefix and samples. Holding the decoded text instead would cost up to 4 bytes
        # a character, the very copy this module exists to avoid.
        total = sum(len(p) for p in _decoded(pieces))
        wanted = tokens.sample_spans(total)
        prefix: list[str] = []
        have = 0
        samples = [""] * len(wanted)
        offset = 0
        blank = True
        for text in _decoded(pieces):
            blank = blank and not text.strip()
            if have < PREFIX_CHARS:
                prefix.append(text[:PREFIX_CHARS - have])
                have += len(prefix[-1])
            end = offset + len(text)
            for i, (start, stop) in enumerate(wanted):
                if start < end and stop > offset:
                    samples[i] += text[max(start - offset, 0):stop - offset]
            offset = end
        return cls("".join(prefix), total, len(raw), tuple(samples), blank=blank)


def total_chars(text: str) -> int:
    """The full length of a text, a LongText's included."""
    return getattr(text, "total_chars", len(text))


def is_blank(text: str) -> bool:
    """Whether a text is only whitespace, a LongText's whole text included."""
    return text.blank if isinstance(text, LongText) else not text.strip()


class WireResult(dict):
    """A large result as the pipeline sees it: its small members decoded, the rest lean (see the
    module docstring). `wire` is the whole result as the server sent it: that is what is stored."""

    wire: msgspec.Raw

    def whole(self) -> dict[str, Any]:
        """The result parsed in full: as costly as ever; for the rare paths that need every value
        (the forward-all policy, an outputSchema check within its limit)."""
        return _decode(self.wire)


def lean_envelope(frame: Any, wanted: Any) -> tuple[Any, WireResult] | None:
    """(request id, lean result) of a large JSON-RPC answer whose request id `wanted(id)`
    accepts; None when the frame is anything else or msgspec refuses it (read it as usual)."""
    if len(frame) < LARGE_BYTES:
        return None
    try:
        envelope = msgspec.json.decode(frame, type=Envelope)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    raw = envelope.result
    if (envelope.method is not None or len(envelope.error) or envelope.id is None
            or bytes(memoryview(raw)[:1]) != b"{" or not wanted(envelope.id)):
        return None
    if not _valid_utf8(memoryview(raw)):
        return None  # msgspec checks the UTF-8 of what it decodes, not of a Raw it skips
    try:
        return envelope.id, lean(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError):
        return None


def _valid_utf8(data: memoryview) -> bool:
    """Whether `data` is valid UTF-8, checked `PIECE_BYTES` at a time (never decoded whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(data), PIECE_BYTES):
            decoder.decode(data[start:start + PIECE_BYTES])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def lean(raw: msgspec.Raw) -> WireResult:
    """The lean reading of a result object (see WireResult)."""
    result = WireResult()
    result.wire = raw
    for key, value in msgspec.json.decode(raw, type=dict[str, msgspec.Raw]).items():
        if len(value) <= SMALL_BYTES:
            result[key] = _decode(value)
        elif key == "content" and _starts(value, b"["):
            result[key] = [_lean_block(block) for block in msgspec.json.decode(value, type=list[msgspec.Raw])]
        else:
            result[key] = LargeJSON(value)
    return result


def _lean_block(raw: msgspec.Raw, resource: bool = False) -> Any:
    """A text block's long `text` (or an embedded resource's, `resource`) as a LongText: the
    only values the projection cuts, so the only ones it may see a prefix of. Anything else large
    (an image's data, a block of a type the projection shows as JSON) is decoded: what the model
    is sent is taken from it whole."""
    if len(raw) <= SMALL_BYTES or not _starts(raw, b"{"):
        return _decode(raw)
    members = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    kind = _decode(members["type"]) if "type" in members and len(members["type"]) <= SMALL_BYTES else None
    block: dict[str, Any] = {}
    for key, value in members.items():
        if len(value) > SMALL_BYTES and key == "text" and (resource or kind == "text") and _starts(value, b'"'):
            block[key] = LongText.from_literal(value)
        elif len(value) > SMALL_BYTES and key == "resource" and kind == "resource" and _starts(value, b"{"):
            block[key] = _lean_block(value, resource=True)
        else:
            block[key] = _decode(value)
    return block


def _starts(raw: msgspec.Raw, prefix: bytes) -> bool:
    return bytes(memoryview(raw)[:1]) == prefix


def _decode(raw: Any) -> Any:
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return json.loads(bytes(raw))  # what msgspec refuses and Python accepts: a lone surrogate


def _string_pieces(inner: memoryview) -> Any:
    """The inside of a JSON string literal in pieces of about PIECE_BYTES, each cut where it can
    be decoded alone: not inside an escape, a surrogate pair or a UTF-8 sequence."""
    start, size = 0, len(inner)
    while start < size:
        end = min(start + PIECE_BYTES, size)
        if end < size:
            end = _safe_cut(inner, start, end)
        yield inner[start:end]
        start = end


def _safe_cut(inner: memoryview, start: int, end: int) -> int:
    while end > start + 1 and 0x80 <= inner[end] <= 0xBF:  # a UTF-8 continuation byte
        end -= 1
    # An escape is at most 6 bytes: only the last backslash within 6 bytes of the cut can start
    # one the cut would split. Then a cut right after the first half of a surrogate pair moves
    # before it.
    end = _before_split_escape(inner, start, end)
    if end - start > 6 and _escape_at(inner, start, end - 6) and inner[end - 5] == ord("u") and bytes(inner[end - 4:end - 2]).lower() in HIGH:
        end -= 6
    return end


def _before_split_escape(inner: memoryview, start: int, end: int) -> int:
    for pos in range(end - 1, max(start, end - 6) - 1, -1):
        if inner[pos] == BACKSLASH and _escape_at(inner, start, pos):
            length = 6 if inner[pos + 1] == ord("u") else 2
            return pos if pos + length > end else end
    return end


def _escape_at(inner: memoryview, start: int, pos: int) -> bool:
    """Whether a backslash at `pos` starts an escape: an even run of backslashes before it."""
    if inner[pos] != BACKSLASH:
        return False
    run = pos
    while run > start and inner[run - 1] == BACKSLASH:
        run -= 1  # (the piece before ended on a whole escape)
    return (pos - run) % 2 == 0


HIGH = (b"d8", b"d9", b"da", b"db")
BACKSLASH = ord("\\")


def _decoded(pieces: list[memoryview]) -> Any:
    for piece in pieces:
        yield json.loads(b'"' + bytes(piece) + b'"')


def is_ui_resource(block: dict) -> bool:
    """An embedded resource whose URI is `ui://` (MCP-UI HTML: for the browser, never the model)."""
    resource = block.get("resource") if block.get("type") == "resource" else None
    return isinstance(resource, dict) and str(resource.get("uri", "")).startswith("ui://")
