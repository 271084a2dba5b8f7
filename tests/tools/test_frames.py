"""The JSON-RPC log stores a large frame once, as a preview with its real size."""

from __future__ import annotations

import json
import time

import pytest
from django.utils import timezone

from tests.helpers import refresh_tools, run_call
from tools.mcp.frames import for_storage, preview, wire_size
from tools.models import RpcFrame, ToolResult


@pytest.mark.parametrize("value", [
    {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "héllo"}], "isError": False}},
    {"a": [1, 2.5, None, True, False, "x" * 300], "b": {"c": {}}, "d": []},
])
def test_wire_size_matches_compact_json_for_small_messages(value):
    exact = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    assert abs(wire_size(value) - exact) <= 2  # "é" is one character, two bytes


def test_a_large_frame_is_stored_as_a_bounded_preview_and_a_small_one_verbatim():
    small = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
    assert for_storage(small, 65536) == (small, len(json.dumps(small).encode()), False)
    big = {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "x" * 5_000_000}],
                                                 "structuredContent": {"rows": list(range(100_000))}}}
    payload, size, truncated = for_storage(big, 65536)
    assert truncated and size > 5_000_000
    assert len(json.dumps(payload)) < 65536
    assert payload["id"] == 2 and "more characters not stored" in payload["result"]["content"][0]["text"]
    assert preview("short") == "short"


@pytest.mark.django_db(transaction=True)
def test_a_5_mb_result_is_stored_whole_once_and_its_frame_as_a_preview(basic_server, celery_worker):
    refresh_tools(basic_server)
    call = run_call(basic_server, "big_text", {"megabytes": 5})
    assert call.status == "succeeded", call.error
    full = ToolResult.objects.get(tool_call=call)
    assert len(full.raw["content"][0]["text"]) == 5 * 1024 * 1024  # the result row is whole
    assert call.projection.tokens <= 8000 and call.projection.truncated
    assert len(json.dumps(call.projection.payload)) < 100_000  # the projection keeps what the model is sent
    from tests.helpers import wait_for

    frame = wait_for(lambda: RpcFrame.objects.filter(server=basic_server, direction="in", method="tools/call",
                                                     size_bytes__gt=5_000_000).first(), message="the response frame")
    assert frame.truncated and frame.size_bytes > 5 * 1024 * 1024
    assert len(json.dumps(frame.payload)) < 64 * 1024


@pytest.mark.django_db(transaction=True)
def test_frames_of_a_server_deleted_meanwhile_are_dropped_quietly(basic_server, user, caplog):
    """A connection still talks while its server is deleted (closing frames): those frames are
    dropped, the others in the batch are written, and nothing is logged as an error."""
    from tools.models import Server
    from tools.runtime.rpclog import FrameRecorder

    gone = Server.objects.create(name="gone", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    gone_pk = gone.pk
    gone.delete()
    recorder = FrameRecorder()
    at = time.time()

    class Config:
        def __init__(self, key):
            self.key = key

    recorder(Config(gone_pk), "in", {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}, at)
    recorder(Config(basic_server.pk), "out", {"jsonrpc": "2.0", "id": 7, "method": "ping"}, at)
    with caplog.at_level("ERROR", logger="tools.runtime.rpclog"):
        recorder.flush()
    assert list(RpcFrame.objects.filter(rpc_id="7").values_list("server_id", flat=True)) == [basic_server.pk]
    assert not RpcFrame.objects.filter(server_id=gone_pk).exists()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


@pytest.mark.django_db(transaction=True)
def test_frames_written_again_after_a_dead_server_take_fresh_ids(basic_server, user, monkeypatch):
    """A batch refused for a dead server's frame is written again without it; another writer
    may take the next ids in between. Seen in CI once the ORM wrote the batch: the retry failed
    "UNIQUE constraint failed: tools_rpcframe.id" (its rows kept the failed insert's numbers)
    and the whole batch was lost."""
    from django.db import IntegrityError

    from inspector import sql_columns
    from tools.models import Server
    from tools.runtime.rpclog import FrameRecorder

    gone = Server.objects.create(name="gone", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    gone_pk = gone.pk
    gone.delete()
    real_insert = sql_columns.insert_numbered
    calls = []

    def insert_with_a_writer_in_between(rows):
        calls.append(len(rows))
        try:
            return real_insert(rows)
        except IntegrityError:
            # Other processes write their frames now, taking the next free ids.
            for _ in rows:
                RpcFrame.objects.create(server=basic_server, direction="in", kind="notification", method="other",
                                        payload={}, size_bytes=2, at=timezone.now())
            raise

    monkeypatch.setattr(sql_columns, "insert_numbered", insert_with_a_writer_in_between)
    recorder = FrameRecorder()

    class Config:
        def __init__(self, key):
            self.key = key

    at = time.time()
    recorder(Config(gone_pk), "in", {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}, at)
    for i in range(3):
        recorder(Config(basic_server.pk), "out", {"jsonrpc": "2.0", "id": 70 + i, "method": "ping"}, at)
    recorder.flush()
    assert len(calls) == 2
    assert sorted(RpcFrame.objects.filter(method="ping").values_list("rpc_id", flat=True)) == ["70", "71", "72"]
    assert RpcFrame.objects.filter(method="other").count() == 4


def test_the_frame_writer_writes_a_request_at_once_and_lets_an_answer_wait_for_the_next_frames(monkeypatch):
    """tools/runtime/rpclog.py: a request is written as soon as it comes (a worker killed a moment later
    keeps what it sent in the log); an answer or a notification waits up to ANSWER_WINDOW and is
    written with the next request, so it is not written while the pipeline stores the result."""
    from types import SimpleNamespace

    from tests.helpers import wait_for
    from tools.runtime import rpclog

    monkeypatch.setattr(rpclog, "ANSWER_WINDOW", 30.0)  # only a request or a flush can end a batch here
    batches: list[list[str]] = []
    monkeypatch.setattr(rpclog.FrameRecorder, "_write", lambda self, batch: batches.append([m["id"] for _, _, m, _ in batch]))
    recorder = rpclog.FrameRecorder()
    config = SimpleNamespace(key="1:test")

    recorder(config, "out", {"jsonrpc": "2.0", "id": "call", "method": "tools/call"}, time.time())
    wait_for(lambda: batches == [["call"]], timeout=10, message="the request written without a flush")
    recorder(config, "in", {"jsonrpc": "2.0", "id": "call", "result": {}}, time.time())
    time.sleep(0.2)
    assert batches == [["call"]]  # the answer waits
    recorder(config, "out", {"jsonrpc": "2.0", "id": "next", "method": "tools/call"}, time.time())
    wait_for(lambda: len(batches) == 2, timeout=10, message="the answer written with the next request")
    assert batches[1] == ["call", "next"]

    recorder(config, "in", {"jsonrpc": "2.0", "method": "notifications/progress", "id": None, "params": {}}, time.time())
    started = time.monotonic()
    recorder.flush(timeout=20)
    assert time.monotonic() - started < 10  # the flush ended the 30-s wait
    assert len(batches) == 3 and batches[2] == [None]
