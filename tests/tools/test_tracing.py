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


def _start_traced():
    from tests.mcp_servers.launch import start_server

    return start_server("traced.py", "http")


@pytest.fixture(scope="module")
def traced_http():
    server = _start_traced()
    yield server
    server.stop()


@pytest.fixture
def fresh_traced_http():
    """A server of its own: every request it notes is this test's, the connection's opening included."""
    server = _start_traced()
    yield server
    server.stop()


def _post(api, path: str, body: dict, **headers):
    return api.client.post(path, data=json.dumps(body), content_type="application/json", **headers)


def _trace(note: dict) -> tuple[str, str]:
    match = TRACEPARENT.match(note["meta_traceparent"] or "")
    assert match, note
    assert note["header_traceparent"] == note["meta_traceparent"], note  # the HTTP header says the same
    return match.group(1), match.group(2)


def test_every_mcp_request_carries_the_trace_started_by_the_web_request(api, user, admin_user, fresh_traced_http):
    server = Server.objects.create(name="traced", transport="streamable_http", url=fresh_traced_http.url, owner=user)
    incoming = {"HTTP_TRACEPARENT": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01", "HTTP_TRACESTATE": "inspector=test",
                "HTTP_BAGGAGE": "user.secret=not-for-servers"}

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
        assert note["meta_baggage"] is None, note  # the trace context only, not the client's baggage
    assert [n["name"] for n in client_notes if n["method"] == "tools/call"] == ["echo"]
    assert _trace(seen_note)[0] == seen_call.trace_id  # across the worker, the trace the API request started
    assert seen_note["meta_tracestate"] is None

    # The call page shows the trace id, to look the call up in a tracing backend.
    api.client.force_login(admin_user)
    page = api.client.get(f"/admin/tools/toolcall/{echo.pk}/change/").content.decode()
    assert 'id="trace-id"' in page and f">{CLIENT_TRACE}</code>" in page


def test_a_call_sent_again_without_a_trace_keeps_the_one_stored_with_it(user, traced_http):
    """A task sent with no trace in its headers (the sweep re-sending a lost call, a retry after an
    input round) still runs the call in the trace stored on its row."""
    from inspector import tracing
    from tests.helpers import refresh_tools
    from tools.models import ToolCall
    from tools.runtime.lifecycle import dispatch, start_tool_call

    server = Server.objects.create(name="traced", transport="streamable_http", url=traced_http.url, owner=user)
    refresh_tools(server)
    with tracing.span("the user's action"):
        call = start_tool_call(server=server, tool_name="echo", arguments={"text": "again"}, origin=ToolCall.Origin.MANUAL,
                               user=user, enqueue=False)
    assert call.trace_id and not tracing.carrier()  # no trace is current when the task is sent
    dispatch(call.pk, call.celery_task_id)
    assert finished_call(str(call.pk)).status == "succeeded"

    seen_call = finished_call(str(start_tool_call(server=server, tool_name="seen", arguments={}, user=user,
                                                  origin=ToolCall.Origin.MANUAL).pk))
    notes = json.loads(seen_call.full_result.raw["content"][0]["text"])
    echo_note = next(n for n in notes if n["name"] == "echo" and n["arguments"] == {"text": "again"})
    assert _trace(echo_note)[0] == call.trace_id


def test_a_chat_message_starts_the_trace_of_the_tool_calls_its_turn_makes(api, user, fake_llm, traced_http):
    """The chat's way: the message's POST → the LLM step's task (task headers) → the tool call the
    step stores in the worker (its row) → the MCP request."""
    from tests.helpers import refresh_tools, wait_for

    server = Server.objects.create(name="traced", transport="streamable_http", url=traced_http.url, owner=user)
    refresh_tools(server)
    conversation = api.post("/api/conversations/", {"model": "openai/test-model", "api_base": fake_llm.url,
                                                     "api_key": "sk-test", "server_ids": [server.pk]}).json()["id"]
    fake_llm.script([{"tool_calls": [{"name": "traced__echo", "arguments": {"text": "from chat"}, "id": "t1"}]},
                     {"text": "Done."}])
    chat_trace = "ef" * 16
    posted = _post(api, f"/api/conversations/{conversation}/messages/", {"text": "echo"},
                   HTTP_TRACEPARENT=f"00-{chat_trace}-{CLIENT_SPAN}-00")
    assert posted.status_code in (200, 201, 202), posted.content
    call = wait_for(lambda: Server.objects.get(pk=server.pk).tool_calls.filter(tool_name="echo").first(),
                    message="the turn's tool call")
    call = finished_call(str(call.pk))
    assert call.status == "succeeded" and call.trace_id == chat_trace

    seen_call = finished_call(start_api_call(api, server, "seen", {}))
    notes = json.loads(seen_call.full_result.raw["content"][0]["text"])
    echo_note = next(n for n in notes if n["name"] == "echo" and n["arguments"] == {"text": "from chat"})
    assert _trace(echo_note)[0] == chat_trace


class _Receiver:
    """A small OTLP/HTTP trace receiver on loopback: the spans it was sent, decoded with opentelemetry-proto."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.spans: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            receiver.spans.append({"trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                                                   "parent": span.parent_span_id.hex(), "name": span.name,
                                                   "role": resource.get("inspector.role"), "path": self.path})
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_spans_of_daphne_and_the_worker_are_exported_over_otlp_in_one_trace(django_db_blocker, user, traced_http):
    """OTEL_EXPORTER_OTLP_ENDPOINT set: daphne and a worker (their own, on a Redis prefix of their own)
    export their spans with the SDK; the web request's and the worker's share the call's trace id."""
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from inspector.models import ApiToken
    from tests.helpers import start_daphne, start_worker, stop_process, wait_for

    receiver = _Receiver()
    from django.conf import settings

    extra = {"REDIS_URL": settings.CELERY_BROKER_URL, "REDIS_PREFIX": f"otel{uuid.uuid4().hex[:6]}:", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
             "OTEL_BSP_SCHEDULE_DELAY": "100", "SWEEP_INTERVAL": "3600"}
    server = Server.objects.create(name="traced-otlp", transport="streamable_http", url=traced_http.url, owner=user)
    _, key = ApiToken.issue(user, "otel")
    with django_db_blocker.unblock(), ThreadPoolExecutor(1) as starter:
        web = starter.submit(start_daphne, "otel-daphne.log", extra)  # both start at once: the worker takes longer
        worker = start_worker(f"otel-{uuid.uuid4().hex[:6]}@localhost", extra, "otel-worker.log")
        app = web.result()
    try:
        auth = {"Authorization": f"Token {key}"}
        assert httpx.post(f"{app.url}/api/servers/{server.pk}/refresh/", headers=auth, timeout=30).status_code == 200
        answer = httpx.post(f"{app.url}/api/servers/{server.pk}/tools/echo/call/?wait=20", json={"arguments": {"text": "x"}},
                            headers=auth, timeout=30)
        assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text
        trace_id = answer.json()["trace_id"]

        def exported() -> bool:
            roles = {s["role"] for s in receiver.spans if s["trace_id"] == trace_id}
            names = {s["name"] for s in receiver.spans if s["trace_id"] == trace_id}
            return roles == {"web", "worker"} and "MCP send tools/call echo" in names

        wait_for(exported, timeout=15, message="spans of daphne and the worker at the OTLP receiver")
        ours = [s for s in receiver.spans if s["trace_id"] == trace_id]
        assert {s["path"] for s in receiver.spans} == {"/v1/traces"}
        web = next(s for s in ours if s["role"] == "web")
        assert web["name"].startswith("POST /api/servers/") and web["parent"] == ""  # where the trace starts
        by_id = {s["span_id"]: s for s in ours}
        mcp_send = next(s for s in ours if s["name"] == "MCP send tools/call echo")
        call_span = by_id[mcp_send["parent"]]  # the SDK's client span is a child of the worker's call span
        assert call_span["name"] == "tool call echo" and call_span["role"] == "worker"
    finally:
        stop_process(app.proc)
        stop_process(worker)
        receiver.stop()
