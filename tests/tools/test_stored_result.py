"""A stored full result is served in pieces read from the database (tools/runtime/stored_result.py):
the bytes and the Content-Length must be exactly the column's text, whatever the piece size
and whatever characters fall on a piece boundary."""

from __future__ import annotations

import asyncio
import json
import threading
from urllib.parse import urlparse

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.signals import request_finished
from django.db import OperationalError, close_old_connections, connection
from django.db.models import TextField
from django.db.models.functions import Cast

from inspector.models import ApiToken
from tests.helpers import streamed_body
from tools.runtime import stored_result
from tools.models import Server, ToolCall, ToolResult

pytestmark = pytest.mark.django_db

# One, two, three and four UTF-8 bytes per character, and escapes: boundaries land everywhere.
MIXED = 'a-é-€-😀-漢字-"quoted"-\\-\n-\u0001-'


def store_call(user, raw: dict, name: str = "s") -> ToolCall:
    """A finished call of `user` whose result is `raw`, written as the pipeline writes it (its
    own compact UTF-8 serialisation, stored as it is)."""
    server = Server.objects.create(name=name, transport="streamable_http", url="http://h/mcp", owner=user)
    call = ToolCall.objects.create(server=server, tool_name="t", origin="manual", requested_by=user, status="succeeded")
    text = stored_result.serialise(raw)
    ToolResult.objects.create(tool_call=call, raw=stored_result.JSONText(text), size_bytes=stored_result.utf8_length(text),
                              tokens=1)
    return call


@pytest.fixture
def stored_call(user):
    raw = {"content": [{"type": "text", "text": MIXED * 400}], "structuredContent": {"rows": [MIXED] * 50}}
    call = store_call(user, raw)
    assert ToolResult.objects.get(tool_call=call).raw == raw
    return call, raw


def column_text(call) -> str:
    return ToolResult.objects.filter(tool_call=call).annotate(t=Cast("raw", TextField())).values_list("t", flat=True).get()


@pytest.mark.parametrize("piece_bytes", [997, 4096])
def test_the_result_and_the_detail_are_the_column_text_read_in_pieces(api, stored_call, monkeypatch, piece_bytes):
    call, raw = stored_call
    monkeypatch.setattr(stored_result, "PIECE_BYTES", piece_bytes)
    monkeypatch.setattr(stored_result, "SEND_BYTES", 100)
    text = column_text(call)
    assert len(text.encode()) > 3 * piece_bytes, "the result needs several pieces"

    response = api.get(f"/api/tool-calls/{call.pk}/result/")
    assert response.status_code == 200 and response.streaming
    body = streamed_body(response)
    assert body == text.encode() and int(response["Content-Length"]) == len(body)
    assert json.loads(body) == raw

    detail = api.get(f"/api/tool-calls/{call.pk}/")
    assert detail.status_code == 200 and detail.streaming
    whole = streamed_body(detail)
    assert int(detail["Content-Length"]) == len(whole)
    parsed = json.loads(whole)
    assert parsed["full"] == raw and parsed["id"] == str(call.pk)


def test_a_small_result_is_one_plain_answer(api, stored_call):
    call, raw = stored_call
    detail = api.get(f"/api/tool-calls/{call.pk}/")
    assert not detail.streaming and detail.json()["full"] == raw


def test_a_call_without_a_result_says_so(api, stored_call):
    call, _ = stored_call
    ToolResult.objects.filter(tool_call=call).delete()
    assert api.get(f"/api/tool-calls/{call.pk}/").json()["full"] is None
    assert api.get(f"/api/tool-calls/{call.pk}/result/").status_code == 404


def open_cursors() -> int:
    """The open cursors of this test's connection (which the app's sync code uses here too: an
    outer async_to_sync thread runs the thread-sensitive parts). Compared before and after, as
    another test's unread streamed answer may have left one (the test client closes a streamed
    response only once it is read)."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_cursors")
        return cursor.fetchone()[0]


@pytest.fixture
def opened(monkeypatch) -> list[stored_result.StoredResult]:
    """Every StoredResult the views open, to check that each one's handle was released."""
    seen = []

    def open_stored(tool_call_id):
        stored = original(tool_call_id)
        seen.append(stored)
        return stored

    original = stored_result.open_stored
    monkeypatch.setattr(stored_result, "open_stored", open_stored)
    return seen


def released(seen: list[stored_result.StoredResult]) -> bool:
    return bool(seen) and all(s is None or (s.blob is None and s.cursor is None) for s in seen)


def test_no_reader_outlives_the_answer_read_or_not(api, stored_call, monkeypatch, opened):
    """A result is read through a blob handle (SQLite) or a cursor (PostgreSQL, opened
    before the answer starts): read to the end, or dropped by a client that left before the
    first piece, it is closed."""
    cursors = open_cursors()
    call, _ = stored_call
    monkeypatch.setattr(stored_result, "PIECE_BYTES", 997)
    read = api.get(f"/api/tool-calls/{call.pk}/result/")
    assert streamed_body(read) == column_text(call).encode()
    assert released(opened) and open_cursors() == cursors
    opened.clear()
    unread = api.get(f"/api/tool-calls/{call.pk}/?full=1")
    # PostgreSQL's cursor is open before the body (it gave the length); SQLite opens its blob
    # only when the body is read (a blob held by an unread response blocked its connection's writes).
    assert unread.streaming and released(opened) == (connection.vendor == "sqlite")
    # What Django does when a client leaves before the body (without the signal that would
    # close the test's connection, as the test client does itself).
    request_finished.disconnect(close_old_connections)
    try:
        unread.close()
    finally:
        request_finished.connect(close_old_connections)
    assert released(opened) and open_cursors() == cursors
    opened.clear()
    monkeypatch.setattr(stored_result, "PIECE_BYTES", 1024 * 1024)
    assert not api.get(f"/api/tool-calls/{call.pk}/").streaming
    assert released(opened) and open_cursors() == cursors


# --- Through the ASGI application, as daphne serves it ----------------------------------------------

async def asgi_get(path: str, key: str, *, leave_after: int | None = None) -> tuple[int, dict, bytes]:
    """One GET through the app; the client leaves after `leave_after` body messages. `send`
    yields to the loop like a real server under back-pressure, so a disconnect can land in it."""
    from inspector.asgi import application

    messages, gone, first = [], asyncio.Event(), True

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        messages.append(message)
        if leave_after is not None and sum(m["type"] == "http.response.body" for m in messages) >= leave_after:
            gone.set()
        await asyncio.sleep(0.01)

    host = urlparse(settings.PUBLIC_URL).netloc.encode()
    await application({"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                       "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
                       "headers": [(b"host", host), (b"authorization", f"Token {key}".encode())],
                       "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}, receive, send)
    start = messages[0]
    body = b"".join(bytes(m.get("body", b"")) for m in messages if m["type"] == "http.response.body")
    return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, body


@pytest.fixture
def big_call(transactional_db, user):
    """A 3 MB result, committed (the app's threads read it with their own connections)."""
    call = store_call(user, {"content": [{"type": "text", "text": MIXED * 100_000}]})
    _, key = ApiToken.issue(user, "stream")
    return call, key, column_text(call).encode()


def test_a_client_leaving_mid_answer_releases_the_reader_in_its_request(big_call, opened):
    cursors = open_cursors()
    call, key, text = big_call

    async def leave():
        answer = await asgi_get(f"/api/tool-calls/{call.pk}/result/", key, leave_after=3)
        # Checked at once, in the same loop: an abandoned body is finalised later, by the
        # garbage collector or the loop's shutdown, on whatever thread runs it then.
        return answer, released(opened)

    (status, headers, body), released_at_once = async_to_sync(leave)()
    assert status == 200 and 0 < len(body) < int(headers["content-length"]) == len(text)
    assert released_at_once and open_cursors() == cursors
    # The connection it used serves the next answer whole.
    status, headers, body = async_to_sync(asgi_get)(f"/api/tool-calls/{call.pk}/result/", key)
    assert status == 200 and body == text and open_cursors() == cursors


def test_a_database_error_mid_answer_is_padded_out_and_the_next_answers_are_served(big_call, opened, monkeypatch):
    """The read fails after the first piece (a restarted database, a dropped connection): nothing
    escapes the app (an exception there skipped closing the response: the pooled connection was
    never given back, and after a few such errors the web process served nothing)."""
    cursors = open_cursors()
    call, key, text = big_call
    finished = []

    def on_finished(sender, **kwargs):
        finished.append(sender)

    request_finished.connect(on_finished)
    pieces = stored_result.StoredResult.pieces

    def failing(self):
        reader = pieces(self)
        yield next(reader)
        reader.close()
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(stored_result.StoredResult, "pieces", failing)
    try:
        status, headers, body = async_to_sync(asgi_get)(f"/api/tool-calls/{call.pk}/result/", key)
    finally:
        request_finished.disconnect(on_finished)
    # Daphne cannot abort a begun answer: it is completed with spaces, so the client is not left
    # waiting for bytes that never come, and what it got fails to parse.
    assert status == 200 and len(body) == int(headers["content-length"]) == len(text)
    assert body[:stored_result.PIECE_BYTES] == text[:stored_result.PIECE_BYTES]
    assert body[stored_result.PIECE_BYTES:].strip() == b""
    with pytest.raises(ValueError):
        json.loads(body)
    assert finished, "the response was closed, so its connection went back"
    assert released(opened) and open_cursors() == cursors
    monkeypatch.setattr(stored_result.StoredResult, "pieces", pieces)
    assert async_to_sync(asgi_get)(f"/api/tool-calls/{call.pk}/result/", key)[2] == text


@pytest.mark.parametrize("when", ["mid-answer", "before the first piece"])
def test_an_answer_never_carries_another_rows_bytes(big_call, other_user, opened, monkeypatch, when):
    """The call's result is deleted (its conversation or server deleted) and another user's
    result stored while the answer is sent. Mid-answer, the answer goes on with the row it
    opened; before its first piece, PostgreSQL's cursor already holds the row and SQLite, which
    opens its blob then, finds the row gone and sends spaces. Never another row's bytes, never
    more than its Content-Length: on SQLite an implicit rowid is reused, and reopening the row
    by rowid for each piece once served the new row."""
    call, key, text = big_call

    def replace_the_row():
        ToolCall.objects.filter(pk=call.pk).delete()
        store_call(other_user, {"content": [{"type": "text", "text": "their secret " * 300_000}]}, name="o")

    if when == "before the first piece":
        open_stored = stored_result.open_stored

        def open_then_replace(tool_call_id):
            stored = open_stored(tool_call_id)
            # By another request (its own thread and connection), before this body is read.
            other = threading.Thread(target=lambda: (replace_the_row(), connection.close()))
            other.start()
            other.join()
            return stored

        monkeypatch.setattr(stored_result, "open_stored", open_then_replace)

    async def scenario():
        from asgiref.sync import sync_to_async

        task = asyncio.ensure_future(asgi_get(f"/api/tool-calls/{call.pk}/result/", key))
        if when == "mid-answer":
            while not opened or opened[0] is None or (opened[0].blob is None and opened[0].cursor is None):
                await asyncio.sleep(0.001)
            await sync_to_async(replace_the_row, thread_sensitive=False)()
        return await task

    status, headers, body = async_to_sync(scenario)()
    assert status == 200 and b"their secret" not in body
    if when == "mid-answer" or connection.vendor == "postgresql":
        assert body == text and int(headers["content-length"]) == len(body)
    else:  # SQLite found the row gone at the first piece: spaces to the announced length
        assert body.strip() == b"" and int(headers["content-length"]) == len(body) == len(text)
    assert released(opened)


def test_a_reader_the_view_opened_but_no_response_closed_holds_nothing(big_call):
    """A client that leaves while the view runs: Django never gets the response to close. On
    PostgreSQL the held cursor goes back to the pool with the connection, the whole result
    materialised on the server, until the next result read on that connection closes it (and
    the next request on a thread of the same ident failed "cursor already exists" when Django
    named the cursor); SQLite holds nothing before the body is read."""
    call, _, text = big_call
    stored = stored_result.open_stored(call.pk)
    assert stored is not None and stored.octets > 0
    if connection.vendor == "postgresql":
        assert open_cursors() == 1
        # The connection goes back to the pool with it (as at the end of the request); the next
        # result read on the connection closes it before opening its own.
        again = stored_result.open_stored(call.pk)
        assert open_cursors() == 1 and again.whole() == text and open_cursors() == 0
    else:
        assert stored.blob is None
        connection.close()
    # Whatever connection comes next can write.
    ToolCall.objects.filter(pk=call.pk).update(error="written after")
    assert ToolCall.objects.get(pk=call.pk).error == "written after"


# --- what pages read of a result: its first bytes, and whether it carries an MCP-UI view ------------

def test_the_head_is_the_first_bytes_cut_before_a_split_character(stored_call):
    call, _ = stored_call
    data = column_text(call).encode()
    for limit in (1, 2, 3, 4, 5, 17, 1000, len(data) - 1, len(data), len(data) + 10):
        text, octets = stored_result.head(call.pk, limit)
        assert octets == len(data)
        assert text == data[:limit].decode("utf-8", errors="ignore")  # MIXED is valid: only the split end goes
        assert len(data[:limit]) - len(text.encode()) < 4
    assert stored_result.head(call.pk, len(data))[0] == column_text(call)
    other = ToolCall.objects.create(server=call.server, tool_name="t", origin="manual", requested_by=call.requested_by)
    assert stored_result.head(other.pk, 100) is None


UI_RESOURCE = {"uri": "ui://widget/card", "mimeType": "text/html", "text": "<p>card</p>"}


@pytest.mark.parametrize("blocks, found", [
    ([{"type": "text", "text": MIXED * 900}], False),
    # A text that merely names the scheme is read whole and found to hold no view.
    ([{"type": "text", "text": MIXED * 900 + "see ui://widget/card"}], False),
    ([{"type": "text", "text": MIXED * 900}, {"type": "resource", "resource": UI_RESOURCE}], True),
])
def test_a_view_in_a_big_result_is_found_without_reading_the_column_as_a_value(user, monkeypatch, blocks, found):
    """The pages that look for an MCP-UI view (has_view in every summary, the view and player
    endpoints) read a big result in pieces; the column is never selected as a JSON value (a
    40 MB result parsed whole costs daphne ~10x its size)."""
    from django.test.utils import CaptureQueriesContext

    from tools.runtime.events import summary_queryset, tool_call_json
    from tools.models import Projection

    monkeypatch.setattr(stored_result, "PIECE_BYTES", 4096)  # "big": several pieces
    call = store_call(user, {"content": blocks, "structuredContent": {"rows": [MIXED] * 50}})
    assert ToolResult.objects.get(pk=call.pk).size_bytes > 4 * 4096
    # forward-all keeps no record of a replaced view: the result itself is looked at.
    Projection.objects.create(tool_call=call, payload={}, text="", policy="forward-all", size_bytes=0, tokens=0)
    with CaptureQueriesContext(connection) as queries:
        assert stored_result.embedded_view(call.pk) == (UI_RESOURCE if found else None)
        assert tool_call_json(summary_queryset(ToolCall.objects.filter(pk=call.pk)).get())["has_view"] is found
    assert not [q["sql"] for q in queries if '."raw"' in q["sql"]]
