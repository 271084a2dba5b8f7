"""W3C trace context from the user's action to the MCP server (issue 26.6, 2026-07-28): the web
request starts the trace, the worker carries it (a call's stored context; a task's headers), and
every MCP request carries it in `_meta.traceparent` and, over Streamable HTTP, in the
`traceparent` header. No OTLP endpoint here: the ids are minted without the SDK.

Real parts: tests/mcp_servers/traced.py over Streamable HTTP (it notes the context of each
request it gets), the suite's Celery worker, the JSON API through Django's middleware.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import finished_call, start_api_call
from tools.models import Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$")
CLIENT_TRACE, CLIENT_SPAN = "ab" * 16, "cd" * 8


@pytest.fixture(scope="module")
def traced_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("traced.py", "http")
    yield server
    server.stop()


def _post(api, path: str, body: dict, **headers):
    return api.client.post(path, data=json.dumps(body), content_type="application/json", **headers)


def _trace(note: dict) -> tuple[str, str]:
    match = TRACEPARENT.match(note["meta_traceparent"] or "")
    assert match, note
    assert note["header_traceparent"] == note["meta_traceparent"], note  # the HTTP header says the same
    return match.group(1), match.group(2)


def test_every_mcp_request_carries_the_trace_started_by_the_web_request(api, user, traced_http):
    server = Server.objects.create(name="traced", transport="streamable_http", url=traced_http.url, owner=user)
    incoming = {"HTTP_TRACEPARENT": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01", "HTTP_TRACESTATE": "inspector=test"}

    # A refresh (a task the page waits for: the context rides in the task's headers).
    assert _post(api, f"/api/servers/{server.pk}/refresh/", {}, **incoming).status_code == 200
    # A tool call (its context is stored with the row, which the worker reads).
    answer = _post(api, f"/api/servers/{server.pk}/tools/echo/call/", {"arguments": {"text": "hi"}}, **incoming)
    assert answer.status_code == 202 and answer.json()["trace_id"] == CLIENT_TRACE
    echo = finished_call(answer.json()["id"])
    assert echo.status == "succeeded", echo.error
    assert echo.trace_id == CLIENT_TRACE and echo.trace_context["tracestate"] == "inspector=test"

    # Without a traceparent from the client, the web request starts a new trace.
    seen_call = finished_call(start_api_call(api, server, "seen", {}))
    assert TRACEPARENT.match(seen_call.trace_context["traceparent"]) and seen_call.trace_id != CLIENT_TRACE
    notes = json.loads(seen_call.full_result.raw["content"][0]["text"])

    *client_notes, seen_note = notes
    assert {n["method"] for n in client_notes} >= {"tools/list", "tools/call"}
    for note in client_notes:  # opening the connection, the refresh's list, the call: all in the client's trace
        trace_id, parent = _trace(note)
        assert trace_id == CLIENT_TRACE, note
        assert parent != CLIENT_SPAN, note  # a child: the worker's span, not the client's own
        assert note["meta_tracestate"] == note["header_tracestate"] == "inspector=test", note
    assert [n["name"] for n in client_notes if n["method"] == "tools/call"] == ["echo"]
    assert _trace(seen_note)[0] == seen_call.trace_id  # across the worker, the trace the API request started
    assert seen_note["meta_tracestate"] is None
