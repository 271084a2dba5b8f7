"""A stored full result is served in pieces read from the database (tools/stored_result.py):
the bytes and the Content-Length must be exactly the column's text, whatever the piece size
and whatever characters fall on a piece boundary."""

from __future__ import annotations

import json

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections, connection
from django.db.models import TextField
from django.db.models.functions import Cast

from tests.helpers import streamed_body
from tools import stored_result
from tools.models import Server, ToolCall, ToolResult

pytestmark = pytest.mark.django_db

# One, two, three and four UTF-8 bytes per character, and escapes: boundaries land everywhere.
MIXED = 'a-é-€-😀-漢字-"quoted"-\\-\n-\u0001-'


@pytest.fixture
def stored_call(user):
    server = Server.objects.create(name="s", transport="streamable_http", url="http://h/mcp", owner=user)
    call = ToolCall.objects.create(server=server, tool_name="t", origin="manual", requested_by=user, status="succeeded")
    raw = {"content": [{"type": "text", "text": MIXED * 400}], "structuredContent": {"rows": [MIXED] * 50}}
    # Written as the pipeline writes it: its own compact UTF-8 serialisation.
    text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    ToolResult.objects.create(tool_call=call, raw=stored_result.JSONText(text), size_bytes=stored_result.utf8_length(text),
                              tokens=1)
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
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_cursors WHERE name LIKE '_django_curs_%%'")
        return cursor.fetchone()[0]


def test_no_cursor_outlives_the_answer_read_or_not(api, stored_call, monkeypatch):
    """PostgreSQL reads a result through a held cursor opened before the answer starts: read to
    the end, or dropped by a client that left before the first piece, it is closed."""
    call, _ = stored_call
    monkeypatch.setattr(stored_result, "PIECE_BYTES", 997)
    read = api.get(f"/api/tool-calls/{call.pk}/result/")
    assert streamed_body(read) == column_text(call).encode()
    assert open_cursors() == 0
    small = api.get(f"/api/tool-calls/{call.pk}/?full=1")
    assert small.streaming
    assert open_cursors() in (0, 1)  # the test client has not closed the response yet
    # What Django does when a client leaves before the body (without the signal that would
    # close the test's connection, as the test client does itself).
    request_finished.disconnect(close_old_connections)
    try:
        small.close()
    finally:
        request_finished.connect(close_old_connections)
    assert open_cursors() == 0
    monkeypatch.setattr(stored_result, "PIECE_BYTES", 1024 * 1024)
    assert not api.get(f"/api/tool-calls/{call.pk}/").streaming
    assert open_cursors() == 0
