"""A full result (`ToolResult.raw`) as the database stores it: written from one serialisation,
served as an HTTP body in pieces, never whole in daphne.

Writing: the worker serialises a result once, to measure it (bytes, tokens), and stores that
same text (`JSONText`); a JSONField would serialise the result a second time.

Serving: a 40 MB result read as one column value and encoded for the response held the text
twice and the body once (+120 MB in daphne for `GET /api/tool-calls/{id}/`,
bench/big_results.py). Here the column's JSON text is read in pieces, each sent before the next
is read, and never parsed: on SQLite through incremental blob I/O (the value is never loaded
whole), on PostgreSQL from a server-side cursor over the column cast to text once. Its size in
bytes is known before the first byte is sent, so the response still has a `Content-Length`.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection, transaction
from django.db.models import Expression, JSONField
from django.db.models.expressions import RawSQL

from inspector import pg_nul, sql_columns
from tools.models import ToolResult, embedded_ui_resource

log = logging.getLogger(__name__)

PIECE_BYTES = 1024 * 1024
SEND_BYTES = 256 * 1024
MEASURE_CHARS = 1024 * 1024


class JSONText(Expression):
    """A JSON value already serialised, written to a JSON column as it is."""

    output_field = JSONField()

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def as_sql(self, compiler, connection):
        return "%s", [self.text]

    def as_postgresql(self, compiler, connection):
        return "%s::jsonb", [pg_nul.json_text(self.text)]


def serialise(raw: Any) -> str:
    """The text a result is stored as: compact JSON, UTF-8 as it is (every writer uses it, so an
    exported and imported result reads back byte for byte)."""
    return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))


def utf8_length(text: str) -> int:
    """The size of `text` in UTF-8, without encoding it whole (a copy as big as the result)."""
    if text.isascii():
        return len(text)
    return sum(len(text[i:i + MEASURE_CHARS].encode()) for i in range(0, len(text), MEASURE_CHARS))


class ZeroBlob(Expression):
    """SQLite: a value of `octets` zero bytes, written in pieces afterwards (write_blob)."""

    output_field = JSONField()

    def __init__(self, octets: int) -> None:
        super().__init__()
        self.octets = octets

    def as_sql(self, compiler, connection):
        return "zeroblob(%s)", [self.octets]


class UploadedJSON(Expression):
    """PostgreSQL: the JSON text uploaded in pieces in this transaction (upload_pg)."""

    output_field = JSONField()

    def as_sql(self, compiler, connection):
        return (f"(SELECT convert_from(string_agg(piece, ''::bytea ORDER BY n), 'UTF8')::jsonb "
                f"FROM {UPLOAD_TABLE})"), []


UPLOAD_TABLE = "stored_result_upload"


def create(call: Any, text: Any, **fields: Any) -> ToolResult:
    """Insert a call's full-result row. `text` is a str written as it is, or UTF-8 bytes (a
    large result as its server sent it, tools/mcp/wire_result.py) written in `PIECE_BYTES` pieces:
    one parameter holding it would be copied whole by the driver, and on SQLite once more into
    the record. Call it inside the transaction that writes the call's other rows.

    On SQLite such a value is stored as a BLOB of the UTF-8 text (written through incremental
    blob I/O into a zeroblob), read back like any other: do not query into it with SQLite's JSON
    functions, which take a BLOB for their own binary format."""
    if isinstance(text, str):
        full = ToolResult(tool_call=call, raw=JSONText(text), **fields)
        sql_columns.insert(full)
        return full
    data = memoryview(text)
    if connection.vendor == "postgresql":
        with transaction.atomic():  # the upload's rows last until its end (ON COMMIT DELETE ROWS)
            _upload_pg(_nul_free(data))
            full = ToolResult.objects.create(tool_call=call, raw=UploadedJSON(), **fields)
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {UPLOAD_TABLE}")  # so another upload in this transaction starts empty
        return full
    full = ToolResult.objects.create(tool_call=call, raw=ZeroBlob(len(data)), **fields)
    rowid = ToolResult.objects.filter(pk=full.pk).annotate(rowid=RawSQL("rowid", [])).values_list("rowid", flat=True).get()
    with connection.connection.blobopen(ToolResult._meta.db_table, "raw", rowid, readonly=False) as blob:
        for start in range(0, len(data), PIECE_BYTES):
            blob.write(data[start:start + PIECE_BYTES])
    return full


def _upload_pg(data: memoryview) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {UPLOAD_TABLE} (n integer PRIMARY KEY, piece bytea) "
                       "ON COMMIT DELETE ROWS")
        for n, start in enumerate(range(0, len(data), PIECE_BYTES)):
            cursor.execute(f"INSERT INTO {UPLOAD_TABLE} VALUES (%s, %s)", [n, data[start:start + PIECE_BYTES]])


def _nul_free(data: memoryview) -> memoryview:
    """`data` with its `\\u0000` escapes replaced (inspector/pg_nul.py), looked for piece by
    piece; copied only if it holds one."""
    for start in range(0, len(data), PIECE_BYTES):
        if b"\\u0000" in bytes(data[max(start - 5, 0):start + PIECE_BYTES]):
            return memoryview(pg_nul.json_bytes(bytes(data)))
    return data


@dataclass
class StoredResult:
    """A stored result opened for reading: its size in bytes and what its pieces come from.

    The size and the pieces agree even if the row changes while the answer is sent. On
    PostgreSQL one held server-side cursor gives both: its rows carry a piece and the total
    length (casting a 40 MB jsonb to text is most of the work, so it is done once). On SQLite
    the size is the blob's, and the first piece opens one blob handle that reads the rest from
    its snapshot, after checking that its rowid still names this call's row of that size (an
    implicit rowid is reused by another user's row once this one is deleted). The handle is
    opened only when the body is read: a blob held open by a response nobody reads would keep
    its connection's read snapshot, and that connection's next write would fail "database is
    locked". Read the pieces or `close()` it."""

    tool_call_id: object
    octets: int
    rowid: int | None = None  # SQLite
    blob: Any = None  # SQLite, once reading has begun
    cursor: Any = None  # PostgreSQL, positioned after `first`
    first: bytes = b""

    def whole(self) -> bytes:
        """The text in one piece: for small results only."""
        return b"".join(self.pieces())

    def pieces(self) -> Iterator[bytes]:
        """The text as UTF-8, `PIECE_BYTES` at a time; the handle is closed at the end."""
        try:
            if self.rowid is not None:
                self.blob = _open_blob(self.tool_call_id, self.rowid)
                if self.blob is None or len(self.blob) != self.octets:
                    raise OperationalError(f"the result of tool call {self.tool_call_id} changed while it was being sent")
                for _ in range(0, self.octets, PIECE_BYTES):
                    yield self.blob.read(PIECE_BYTES)
                return
            yield self.first
            while self.cursor is not None:
                with connection.wrap_database_errors:
                    row = self.cursor.fetchone()
                if row is None:
                    break
                yield bytes(row[0])
        finally:
            self.close()

    def close(self) -> None:
        """Release the blob or cursor. A connection that broke meanwhile is not an error here:
        Django discards it."""
        handle, self.blob, self.cursor = self.blob or self.cursor, None, None
        if handle is not None:
            try:
                handle.close()
            except Exception:  # noqa: BLE001 - see the docstring
                log.info("closing the reader of tool call %s's result failed", self.tool_call_id, exc_info=True)


# PostgreSQL casts the jsonb to text once (the CTE) and a server-side cursor hands the pieces
# over one by one, each row with the total length; a query per piece cast the column each time.
_PG_PIECES = (
    "WITH r AS MATERIALIZED (SELECT convert_to(raw::text, 'UTF8') AS b FROM {table} WHERE tool_call_id = %s) "
    "SELECT substring(r.b FROM g FOR %s), length(r.b) FROM r, generate_series(1, length(r.b), %s) AS g ORDER BY g"
)


def _open_pg_cursor(tool_call_id) -> StoredResult | None:
    """PostgreSQL: the result's pieces through a held cursor (it outlives the statement's
    implicit transaction, so nothing stays open between pieces).

    If the client leaves while the view still runs, Django never gets the response to close and
    the connection goes back to the pool with the cursor open, the result materialised on the
    server. Such a cursor is closed by the next result read on that connection (`CLOSE ALL`:
    a connection serves one request at a time, so any cursor left on it is stale), and cursor
    names are unique (Django names them by thread, and a reused thread ident could not declare
    its own)."""
    connection.ensure_connection()
    conn = connection.connection
    # Binary: a bytea piece comes as its bytes, not as hex text twice its size.
    cursor = conn.cursor(name=f"stored_result_{secrets.token_hex(6)}", withhold=True, binary=True)
    stored = StoredResult(tool_call_id, 0, cursor=cursor)
    try:
        with connection.wrap_database_errors:
            conn.execute("CLOSE ALL")
            cursor.execute(_PG_PIECES.format(table=ToolResult._meta.db_table), [tool_call_id, PIECE_BYTES, PIECE_BYTES])
            row = cursor.fetchone()
    except BaseException:
        stored.close()
        raise
    if row is None:
        stored.close()
        return None
    stored.octets, stored.first = row[1], bytes(row[0])
    return stored


def _open_blob(tool_call_id, rowid: int):
    """SQLite: a read handle on the call's `raw`, or None if that rowid no longer names the
    call's row (checked on the same connection, so in the snapshot the open handle reads)."""
    connection.ensure_connection()
    blob = connection.connection.blobopen(ToolResult._meta.db_table, "raw", rowid, readonly=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT tool_call_id FROM {ToolResult._meta.db_table} WHERE rowid = %s", [rowid])
            owner = cursor.fetchone()
    except BaseException:
        blob.close()
        raise
    if owner is None or str(owner[0]).replace("-", "") != str(tool_call_id).replace("-", ""):
        blob.close()
        return None
    return blob


def _sqlite_blob(tool_call_id):
    """(rowid, its result's blob opened) on SQLite, or (None, None) if the call has no result row."""
    rowid = ToolResult.objects.filter(tool_call_id=tool_call_id).annotate(rowid=RawSQL("rowid", [])) \
        .values_list("rowid", flat=True).first()
    return rowid, (_open_blob(tool_call_id, rowid) if rowid is not None else None)


def open_stored(tool_call_id) -> StoredResult | None:
    """The result opened for reading; None if the call has no result row."""
    if connection.vendor == "sqlite":
        rowid, blob = _sqlite_blob(tool_call_id)
        if blob is None:
            return None
        with blob:
            return StoredResult(tool_call_id, len(blob), rowid=rowid)
    return _open_pg_cursor(tool_call_id)


def head(tool_call_id, limit: int) -> tuple[str, int] | None:
    """(the first `limit` bytes of the stored text, cut before a character they would split; its
    whole size in bytes), or None if the call has no result row: a page shows that much of a
    result without reading the rest (SQLite: one blob read; PostgreSQL: one cast, `limit` bytes
    sent)."""
    if connection.vendor == "sqlite":
        rowid, blob = _sqlite_blob(tool_call_id)
        if blob is None:
            return None
        with blob:
            data, octets = blob.read(limit), len(blob)
    else:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT substring(r.b FROM 1 FOR %s), length(r.b) FROM (SELECT convert_to(raw::text, 'UTF8') AS b "
                f"FROM {ToolResult._meta.db_table} WHERE tool_call_id = %s) AS r", [limit, tool_call_id])
            row = cursor.fetchone()
        if row is None:
            return None
        data, octets = bytes(row[0]), row[1]
    return codecs.getincrementaldecoder("utf-8")().decode(data), octets  # not final: a split character is left out


def digest(tool_call_id) -> str | None:
    """The SHA-256 of a stored result's text, read in pieces (two results are compared by it:
    parsed, a 40 MB one costs a worker ~10x its size); None if the call has no result row."""
    stored = open_stored(tool_call_id)
    if stored is None:
        return None
    hashed = hashlib.sha256()
    for piece in stored.pieces():
        hashed.update(piece)
    return hashed.hexdigest()


# MCP-UI resources are found by their URI scheme; JSON may write its slashes escaped.
_UI_SCHEME = (b'"ui://', b'"ui:\\/\\/')


class _Blocks(msgspec.Struct):
    """A result's `content` blocks, each kept as its bytes: every other member is skipped."""

    content: list[msgspec.Raw] = []


def embedded_view(tool_call_id) -> dict | None:
    """The MCP-UI `ui://` resource in a stored result's content (tools/models/
    `embedded_ui_resource`), without parsing a large result that holds none: its pieces are
    scanned for a `ui://` string first, and only a result that has one is read whole, once, its
    content blocks kept as bytes and only those naming `ui://` decoded."""
    stored = open_stored(tool_call_id)
    if stored is None:
        return None
    if stored.octets <= PIECE_BYTES:
        return embedded_ui_resource(json.loads(stored.whole()))
    pieces, tail, found = stored.pieces(), b"", False
    try:
        for piece in pieces:
            window = tail + bytes(piece[:16])
            if any(scheme in piece or scheme in window for scheme in _UI_SCHEME):
                found = True
                break
            tail = bytes(piece[-16:])
    finally:
        pieces.close()
    if not found:
        return None
    stored = open_stored(tool_call_id)
    data = stored.whole() if stored is not None else b"{}"
    for block in msgspec.json.decode(data, type=_Blocks).content:
        if any(scheme in bytes(block) for scheme in _UI_SCHEME):
            found_view = embedded_ui_resource({"content": [msgspec.json.decode(block)]})
            if found_view is not None:
                return found_view
    return None


async def body(stored: StoredResult, prefix: str = "", suffix: str = "") -> AsyncIterator[bytes]:
    """`prefix`, the stored text, `suffix`, as bytes in `SEND_BYTES` pieces.

    The pieces are read in the request's own thread (its database connection), one per step.
    A database error mid-answer must not escape: Django would then never close the response and
    the request's pooled connection would never be given back. Nor can the answer just stop:
    daphne cannot abort an answer it has begun, so a body short of its Content-Length leaves the
    client waiting for good. The rest of the answer is sent as spaces: it ends at once, and what
    the client got is a JSON object cut short, which fails to parse (the error is logged)."""
    if prefix:
        yield prefix.encode()
    pieces, sent = stored.pieces(), 0
    try:
        while piece := await sync_to_async(next)(pieces, b""):
            view = memoryview(piece)[:stored.octets - sent]  # never past the Content-Length
            for start in range(0, len(view), SEND_BYTES):
                yield view[start:start + SEND_BYTES]
            sent += len(view)
        if sent != stored.octets:
            raise OperationalError(f"the stored text ended after {sent} bytes")
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("reading tool call %s's result failed mid-answer after %d of %d bytes; the rest is sent as "
                      "spaces", stored.tool_call_id, sent, stored.octets)
        for start in range(sent, stored.octets, SEND_BYTES):
            yield b" " * min(SEND_BYTES, stored.octets - start)
    finally:
        await sync_to_async(pieces.close)()
        await sync_to_async(stored.close)()
    if suffix:
        yield suffix.encode()


class SplicedBody:
    """Text with stored results spliced in (`parts`: str, or a tool call id whose stored text goes
    there as it is, `null` if it has none), for StreamingHttpResponse: a document holding several
    full results (a conversation's export) without any of them parsed or held whole.

    Each result is opened when its turn comes, one reader at a time (on PostgreSQL opening a
    reader closes any other on the connection), and `close()` releases the open one if the client
    leaves mid-way, in the request's thread (see ResultBody)."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts, self.current = parts, None

    async def _run(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if isinstance(part, str):
                yield part.encode()
                continue
            self.current = await sync_to_async(open_stored)(part)
            if self.current is None:
                yield b"null"
                continue
            async for piece in body(self.current):
                yield piece
            self.current = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._run()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


class ResultBody:
    """The streamed content of an answer carrying a stored result, for StreamingHttpResponse.

    Django calls `close()` when the response closes, in the request's thread, whether the body
    was read to the end or the client left mid-way (an abandoned async generator is only
    finalised later, by the garbage collector, on another thread): the blob or cursor is
    released before the connection goes back to the pool."""

    def __init__(self, stored: StoredResult, prefix: str = "", suffix: str = "") -> None:
        self.stored, self.prefix, self.suffix = stored, prefix, suffix

    def __aiter__(self) -> AsyncIterator[bytes]:
        return body(self.stored, self.prefix, self.suffix)

    def close(self) -> None:
        self.stored.close()

    def content_length(self) -> int:
        """The byte length of what the body yields."""
        return len(self.prefix.encode()) + self.stored.octets + len(self.suffix.encode())
