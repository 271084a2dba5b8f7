"""Large results read lean (tools/mcp/wire_result.py): over a real stdio server and a real worker, and
the lean reading itself against a full parse."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import refresh_tools, run_call, wait_for
from django.db import connection

from tools.runtime import stored_result

from tools.mcp import tokens, wire_result
from tools.mcp.frames import for_storage
from tools.runtime.pipeline import validate_output
from tools.runtime.projection import project
from tools.models import Projection, RpcFrame, ToolResult

MIXED_UNIT = 'héllo "wörld" \\ 日本語 😀\n\t'  # as tests/mcp_servers/basic.py big_mixed


def mixed_text(megabytes: float) -> str:
    return MIXED_UNIT * int(megabytes * 1024 * 1024 / len(MIXED_UNIT.encode()))


def assert_read_lean(call) -> None:
    """The result went the lean way: its frame in the log names structuredContent by size (a
    parsed one is previewed item by item), and on SQLite the stored text is the server's own,
    not the inspector's serialisation of it (the servers write 1e-7, or escape non-ASCII)."""
    frame = wait_for(lambda: RpcFrame.objects.filter(server=call.server, kind="response", method="tools/call").first(),
                     message="the answer's frame in the log")
    assert str(frame.payload["result"]["structuredContent"]).startswith("[object of "), frame.payload
    assert frame.size_bytes > 3 * 1024 * 1024
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT CAST(raw AS TEXT) FROM tools_toolresult WHERE tool_call_id = %s", [call.pk.hex])
            stored = cursor.fetchone()[0]
        assert stored != stored_result.serialise(json.loads(stored))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
@pytest.mark.parametrize("server_fixture", ["stdio_server", "basic_server"])  # stdio, Streamable HTTP
def test_a_large_result_is_stored_as_sent_and_projected_from_a_prefix(request, server_fixture):
    server = request.getfixturevalue(server_fixture)
    refresh_tools(server)
    call = run_call(server, "big_mixed", {"megabytes": 3})
    assert call.status == "succeeded", call.error
    full = ToolResult.objects.get(tool_call=call)
    text = mixed_text(3)
    assert full.raw["content"][0]["text"] == text
    assert full.raw["structuredContent"]["tiny"] == 1e-7
    proj = Projection.objects.get(tool_call=call)
    assert f"of {len(text)} characters" in proj.text
    assert "META-MARKER" not in proj.text + json.dumps(proj.payload)
    assert_read_lean(call)


# --- the lean reading itself, against a full parse -------------------------------------------

def frame(result, ascii_only: bool = False) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "result": result}, ensure_ascii=ascii_only).encode()


def read_lean(result, ascii_only: bool = False) -> wire_result.WireResult:
    found = wire_result.lean_envelope(frame(result, ascii_only), lambda request_id: request_id == 7)
    assert found is not None and found[0] == 7
    return found[1]


@pytest.mark.parametrize("ascii_only", [False, True])
def test_a_long_text_cut_into_tiny_pieces_decodes_to_the_same_text(monkeypatch, ascii_only):
    # Pieces this small put a cut inside every escape, surrogate pair and UTF-8 sequence there is.
    monkeypatch.setattr(wire_result, "PIECE_BYTES", 13)  # (an escaped surrogate pair is 12)
    monkeypatch.setattr(wire_result, "SMALL_BYTES", 16)
    monkeypatch.setattr(wire_result, "LARGE_BYTES", 64)
    monkeypatch.setattr(wire_result, "PREFIX_CHARS", 50)
    text = (MIXED_UNIT + '\\\\"\\u0000\x00\x1f' + "\\" * 5 + "😀😀") * 40
    lean = read_lean({"content": [{"type": "text", "text": text}]}, ascii_only)
    long = lean["content"][0]["text"]
    assert isinstance(long, wire_result.LongText)
    assert long.total_chars == len(text) and str(long) == text[:50]
    literal = json.dumps(text, ensure_ascii=ascii_only).encode()
    assert "".join(wire_result._decoded(list(wire_result._string_pieces(memoryview(literal)[1:-1])))) == text


def same_but_the_estimate(outcome):
    """An Outcome with the note's token estimate left out: the text of a resource block is a
    LongText joined to its header, estimated as the sum of the two (tools/runtime/projection.py join_texts)."""
    scrub = lambda value: re.sub(r"about [0-9,]+ tokens", "about N tokens", json.dumps(value, ensure_ascii=False))
    return scrub(outcome.text), scrub(outcome.payload), outcome.removed, outcome.truncated, outcome.policy


def test_lean_projections_are_the_full_projections():
    text = mixed_text(3)
    results = [
        {"content": [{"type": "text", "text": text}], "structuredContent": {"rows": list(range(300_000))}, "_meta": {"a": 1}},
        {"content": [{"type": "resource", "resource": {"uri": "file:///big.txt", "text": text}}]},
        {"content": [], "structuredContent": {"rows": [{"i": i, "_meta": {"x": 1}} for i in range(100_000)]}},
        {"content": [{"type": "text", "text": "short"}], "x-extra": {"rows": list(range(300_000))}},
    ]
    for result in results:
        lean = read_lean(result)
        assert json.loads(bytes(lean.wire)) == result
        for policy in ("content-first", "strict", "forward-all"):
            for is_app in (False, True):
                full_outcome = project(result, is_app=is_app, policy=policy, token_cap=2000)
                lean_outcome = project(lean, is_app=is_app, policy=policy, token_cap=2000)
                assert same_but_the_estimate(lean_outcome) == same_but_the_estimate(full_outcome), (policy, is_app)
                assert lean_outcome.tokens == full_outcome.tokens


def test_a_long_text_knows_its_length_and_estimates_its_tokens_as_the_whole_would_be():
    text = mixed_text(3)
    long = read_lean({"content": [{"type": "text", "text": text}]})["content"][0]["text"]
    assert long.total_chars == len(text) and len(long) == wire_result.PREFIX_CHARS
    assert long.estimate_tokens("gpt-4o-mini") == tokens.estimate(text, "gpt-4o-mini")
    assert tokens.estimate_utf8(text.encode(), "gpt-4o-mini") == pytest.approx(tokens.estimate(text, "gpt-4o-mini"), rel=0.05)


def test_what_is_not_a_large_wanted_result_is_read_as_usual():
    big = "x" * (wire_result.LARGE_BYTES + 10)
    assert wire_result.lean_envelope(frame({"content": [{"type": "text", "text": "small"}]}), lambda i: True) is None
    assert wire_result.lean_envelope(frame({"content": [{"type": "text", "text": big}]}), lambda i: False) is None
    request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"x": big}}).encode()
    assert wire_result.lean_envelope(request, lambda i: True) is None
    invalid = frame({"content": [{"type": "text", "text": big}]})[:-3] + b",}}"
    assert wire_result.lean_envelope(invalid, lambda i: True) is None
    lone_surrogate = frame({"content": [{"type": "text", "text": big + "\ud800"}]}, ascii_only=True)
    assert wire_result.lean_envelope(lone_surrogate, lambda i: True) is None  # msgspec refuses it; json reads it


def test_the_log_keeps_a_lean_frame_as_a_preview_with_its_size():
    result = {"content": [{"type": "text", "text": mixed_text(2)}], "structuredContent": {"rows": list(range(300_000))}}
    message = {"jsonrpc": "2.0", "id": 7, "result": read_lean(result)}
    payload, size, truncated = for_storage(message, 64 * 1024)
    assert truncated and size == pytest.approx(len(frame(result)), rel=0.01)
    assert payload["result"]["structuredContent"].startswith("[object of ")
    assert payload["result"]["content"][0]["text"].endswith(f"{len(mixed_text(2)) - 1024:,} more characters not stored in the log]")
    json.dumps(payload)


def test_a_large_structured_content_is_schema_checked_up_to_the_limit_and_then_said_unchecked(settings):
    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": {"type": "integer"}}}}
    good = read_lean({"content": [], "structuredContent": {"rows": list(range(300_000))}})
    bad = read_lean({"content": [], "structuredContent": {"rows": list(range(300_000)) + ["x"]}})
    size = bad["structuredContent"].wire_bytes
    settings.OUTPUT_SCHEMA_CHECK_MAX_BYTES = size
    assert validate_output(schema, good) == (True, "")
    valid, message = validate_output(schema, bad)
    assert valid is False and "rows/300000" in message
    settings.OUTPUT_SCHEMA_CHECK_MAX_BYTES = size - 1
    valid, message = validate_output(schema, bad)
    assert valid is None and message.startswith("Not checked against the outputSchema") and f"{size:,} bytes" in message


def test_invalid_utf8_anywhere_in_a_large_result_is_read_as_usual():
    # msgspec checks the UTF-8 of what it decodes, not of a member it keeps as bytes.
    for member in (b'"structuredContent": {"a": "caf\xe9", "pad": "%s"}', b'"_meta": {"x": "\xed\xa0\x80", "pad": "%s"}'):
        pad = b"x" * (wire_result.LARGE_BYTES + 10)
        bad = b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [], ' + member.replace(b"%s", pad) + b"}}"
        assert wire_result.lean_envelope(bad, lambda i: True) is None


def test_what_the_projection_shows_as_json_or_finds_blank_is_judged_on_the_whole_text():
    spaces = " " * (wire_result.PREFIX_CHARS + 1000)
    results = [
        {"content": [{"type": "custom", "text": mixed_text(3)}]},  # shown as JSON: never a prefix
        {"content": [{"type": "text", "text": spaces + "the content after the spaces"}]},
        {"content": [{"type": "text", "text": spaces}], "structuredContent": {"a": 1}},
        {"content": [{"type": "text", "text": spaces}], "isError": True},
    ]
    for result in results:
        lean = read_lean(result)
        for is_app in (False, True):
            full_outcome = project(result, is_app=is_app, policy="content-first", token_cap=2000)
            lean_outcome = project(lean, is_app=is_app, policy="content-first", token_cap=2000)
            assert same_but_the_estimate(lean_outcome) == same_but_the_estimate(full_outcome), (result["content"][0]["type"], is_app)
    assert not isinstance(read_lean(results[0])["content"][0]["text"], wire_result.LongText)


def test_a_long_text_survives_copy_and_pickle():
    import copy
    import pickle

    long = read_lean({"content": [{"type": "text", "text": mixed_text(3)}]})["content"][0]["text"]
    for again in (copy.copy(long), copy.deepcopy(long), pickle.loads(pickle.dumps(long))):
        assert isinstance(again, wire_result.LongText) and again == long
        assert (again.total_chars, again.wire_bytes, again.samples, again.blank) == (long.total_chars, long.wire_bytes, long.samples, long.blank)


def test_token_counts_do_not_depend_on_how_the_server_escapes_text():
    result = {"content": [{"type": "text", "text": mixed_text(2)}]}
    as_utf8 = json.dumps(result, ensure_ascii=False).encode()
    escaped = json.dumps(result).encode()
    assert len(escaped) > 1.3 * len(as_utf8)
    assert tokens.estimate_utf8(escaped) == pytest.approx(tokens.estimate_utf8(as_utf8), rel=0.02)
    assert tokens.estimate_utf8(as_utf8) == pytest.approx(tokens.estimate(json.dumps(result, ensure_ascii=False)), rel=0.02)


def test_the_log_previews_a_lean_frame_whatever_its_limit():
    message = {"jsonrpc": "2.0", "id": 7, "result": read_lean({"content": [], "structuredContent": {"rows": list(range(300_000))}})}
    payload, size, truncated = for_storage(message, 64 * 1024 * 1024)
    assert truncated and payload["result"]["structuredContent"].startswith("[object of ")
    json.dumps(payload)


@pytest.mark.django_db(transaction=True)
def test_two_large_results_stored_in_one_transaction(stdio_server):
    from django.db import transaction

    from tools.models import ToolCall

    calls = [ToolCall.objects.create(server=stdio_server, server_name="s", tool_name="t", arguments={}) for _ in range(2)]
    bodies = [frame({"content": [{"type": "text", "text": mixed_text(1.5)}], "n": n}) for n in range(2)]
    with transaction.atomic():
        for call, body in zip(calls, bodies):
            stored_result.create(call, memoryview(body), size_bytes=len(body), tokens=1)
    for call, body in zip(calls, bodies):
        assert ToolResult.objects.get(tool_call=call).raw == json.loads(body)


def sse_event(data: bytes, eol: bytes, event: bytes = b"message") -> bytes:
    return b"event: " + event + eol + b"data: " + data + eol + eol


class Chunks:
    """An inner response stream: these chunks, then (optionally) an open stream that never ends."""

    def __init__(self, chunks, then_hang=False):
        self.chunks, self.then_hang = chunks, then_hang

    async def __aiter__(self):
        import asyncio

        for chunk in self.chunks:
            yield chunk
        if self.then_hang:
            await asyncio.sleep(3600)

    async def aclose(self):
        pass


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_the_event_stream_passes_each_line_on_as_it_ends_and_swaps_large_answers(eol):
    import asyncio

    from tools.mcp import lean_http

    kept = {}
    transport = lean_http.LeanTransport(None, lambda request_id: request_id == 7, kept)
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}).encode()
    big = frame({"content": [{"type": "text", "text": mixed_text(1.5)}]})
    stream = b"".join([sse_event(request, eol), sse_event(big, eol), sse_event(big.replace(b'"id": 7', b'"id": 8'), eol)])
    cut = [stream[i:i + 4096] for i in range(0, len(stream), 4096)]

    async def read(body, until):
        out = bytearray()
        async for piece in body:
            out += piece
            if until(out):
                return bytes(out)
        return bytes(out)

    # A server request followed by an open stream reaches the SDK at once, whatever ends its lines.
    first = asyncio.run(asyncio.wait_for(read(lean_http._SseBody(Chunks([sse_event(request, eol)], then_hang=True), transport._stand_in),
                                              lambda out: out.endswith(eol + eol)), 5))
    assert first == sse_event(request, eol)
    out = asyncio.run(read(lean_http._SseBody(Chunks(cut), transport._stand_in), lambda out: False))
    events = out.split(eol + eol)
    assert events[0] + eol + eol == sse_event(request, eol)
    assert lean_http.STAND_IN_KEY.encode() in events[1] and len(events[1]) < 500
    assert events[2] + eol + eol == sse_event(big.replace(b'"id": 7', b'"id": 8'), eol)  # not wanted lean: untouched
    assert len(kept) == 1
    lean_http.forget(kept, 7)  # the request ended without the SDK delivering it
    assert kept == {}


def test_streamable_http_answers_near_and_over_1_mb_arrive_over_sse_and_nothing_stays_kept():
    import asyncio

    from tests.mcp_servers.launch import start_server
    from tools.mcp.config import ServerConfig
    from tools.mcp.connection import Connection

    server = start_server("basic.py", "http", "--legacy")  # the 2025-11-25 server answers calls as event streams
    try:
        async def calls():
            async with Connection(ServerConfig(name="basic", transport="streamable_http", url=server.url)) as conn:
                out = []
                # 1,048,480 characters: a JSON answer 7 bytes under the lean size, in an event a
                # little over the SDK's 1 MB default.
                for megabytes in (65530 / 65536, 1.5):
                    raw = await conn.call_tool("big_text", {"megabytes": megabytes}, 30)
                    out.append((wire_result.total_chars(raw["content"][0]["text"]), isinstance(raw, wire_result.WireResult)))
                    assert conn._lean_kept == {}
                return out

        (near, near_lean), (over, over_lean) = asyncio.run(calls())
    finally:
        server.stop()
    assert near == 1_048_480 and not near_lean
    assert over == 16 * int(1.5 * 1024 * 1024 / 16) and over_lean
