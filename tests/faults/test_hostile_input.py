"""Hostile input (issue 10.6): bodies no client should send, to every JSON API endpoint; script
payloads from a hostile MCP server (names, descriptions, results, `_meta`) on pages and in the
admin, in a real browser; and servers that print garbage, never answer, crash mid-call or
flood the client with notifications.

Rules: no 5xx, every refusal a JSON `{"error": "..."}` that says what is wrong, every call ends
with a clear message, and the worker's log has no traceback.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time

import pytest
from django.http import HttpRequest

from chat import history
from chat.tool_calls import caller, calls_of
from chat.models import Conversation
from tests.faults import route_crawl
from tests.helpers import ARTIFACTS, Api, login_page, refresh_tools, run_call
from tests.figures import record
from tests.mcp_servers.hostile import HOSTILE_NAME, PAYLOAD
from tests.mcp_servers.launch import server_path
from tools.models import RpcFrame, Server, Tool, ToolCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

MB = 1024 * 1024
ODD = "\u202eevil\u200b\ufeff\U0001F4A3 e\u0301 \u0000 \ud800"
FIELDS = ("name", "transport", "url", "headers", "env", "command", "args", "shared", "enabled", "projection_policy",
          "arguments", "text", "model", "api_base", "api_key", "system_prompt", "temperature", "server_ids", "title",
          "uri", "content", "structuredContent", "widgetState", "mcpServers")
WRONG_VALUES = ([], {"a": {"b": {}}}, -1.5, None, True, "x" * 100_000)


def hostile_bodies() -> list[tuple[str, bytes]]:
    """(label, raw body) pairs: broken JSON, wrong shapes and types, NUL, odd unicode, 10 MB."""
    raw = [
        ("not json", b"{not json"), ("truncated", b'{"text": "abc'), ("invalid utf-8", b'\xff\xfe{"text": "\xff"}'),
        ("raw NUL", b'{"text": "a\x00b"}'), ("array", b"[1, 2]"), ("null", b"null"), ("string", b'"text"'),
        ("number", b"12"), ("deep nesting", b"[" * 100_000 + b"]" * 100_000), ("huge number", b'{"temperature": 1e999999}'),
        ("duplicate keys", b'{"text": "a", "text": 5}'), ("10 MB of garbage", b"{" + b"x" * (10 * MB)),
        ("10 MB JSON", json.dumps({"text": "x" * (10 * MB), "arguments": {"text": "y" * (10 * MB)}}).encode()),
    ]
    for field in FIELDS:
        for value in WRONG_VALUES:
            raw.append((f"{field}={json.dumps(value)[:20]}", json.dumps({field: value}).encode()))
        raw.append((f"{field} with NUL", json.dumps({field: "a\u0000b"}).encode()))
        raw.append((f"{field} odd unicode", json.dumps({field: ODD}).encode()))
    raw.append(("every field odd", json.dumps({f: ODD for f in FIELDS}).encode()))
    raw.append(("arguments odd", json.dumps({"arguments": {ODD: ODD, "text": ODD}, "name": "echo", "text": ODD}).encode()))
    raw.append(("lone surrogate key", b'{"\\udfff": "\\ud800", "text": "\\ud800"}'))
    return raw


UNREAD_BODIES = ("not json", "invalid utf-8", "raw NUL", "10 MB of garbage", "10 MB JSON")


@contextlib.contextmanager
def body_reads():
    """Counts the reads of a request's body (`HttpRequest.body`, `HttpRequest.read()`) while the
    block runs."""
    reads = []
    body, read = HttpRequest.body, HttpRequest.read

    def counted_body(request):
        reads.append(request.path)
        return body.fget(request)

    def counted_read(request, *args, **kwargs):
        reads.append(request.path)
        return read(request, *args, **kwargs)

    HttpRequest.body, HttpRequest.read = property(counted_body), counted_read
    try:
        yield reads
    finally:
        HttpRequest.body, HttpRequest.read = body, read


def check_answer(response, label: str, method: str, path: str) -> str | None:
    """None when the answer is a clean one; else what is wrong."""
    where = f"{method} {path} [{label}] -> {response.status_code}"
    if response.status_code >= 500:
        return f"{where}: server error {response.content[:200]!r}"
    if response.status_code >= 400:
        try:
            body = json.loads(response.content)
        except ValueError:
            return f"{where}: not JSON: {response.content[:200]!r}"
        if not isinstance(body, dict) or not isinstance(body.get("error"), str) or not body["error"].strip():
            return f"{where}: no error message: {response.content[:200]!r}"
    return None


def test_hostile_bodies_and_queries_to_every_json_endpoint_get_clear_4xx_answers(client, user, basic_server, fake_llm):
    refresh_tools(basic_server)
    client.force_login(user)
    api = Api(client)
    cid = api.post("/api/conversations/", {"model": "openai/test-model", "api_base": fake_llm.url,
                                           "server_ids": [basic_server.pk]}).json()["id"]
    call = run_call(basic_server, "echo", {"text": "hi"}, user=user)
    ToolCall.objects.filter(pk=call.pk).update(**caller(Conversation.objects.get(pk=cid)).row_fields())  # the player's routes name a call of the conversation
    owned = route_crawl.Owned(server=basic_server.pk, tool="echo", call=str(call.pk), conversation=cid, turn=0,
                              token=0, user=user.pk, **route_crawl.asked_and_replayed(call, cid, user))
    routes = [r for r in route_crawl.url_routes() if r.startswith("api/")]
    client.raise_request_exception = False
    problems, requests = [], 0
    bodies = hostile_bodies()
    for route in routes:
        path = route_crawl.fill(route, owned)[0]
        for method in ("post", "patch"):
            with body_reads() as reads:
                if getattr(client, method)(path, data=b"{}", content_type="application/json").status_code == 405:
                    continue  # refused whatever the body (the crawl checks every method's answer)
            # A view that never reads its body (a refresh, a replay) cannot be fooled by one: it
            # gets the bodies that reach it whatever it reads (too big, not UTF-8), not 200 more.
            for label, body in bodies if reads else [b for b in bodies if b[0] in UNREAD_BODIES]:
                response = getattr(client, method)(path, data=body, content_type="application/json")
                requests += 1
                if problem := check_answer(response, label, method.upper(), path):
                    problems.append(problem)
        # Odd query strings on the reads.
        for query in ("?q=%00", "?before=%00", "?after=-1", "?limit=abc", "?limit=99999999999999999999", "?full=%00",
                      "?uri=%00", "?q=%ED%A0%80", "?after=1&before=2", "?server=%00&method=%00"):
            response = client.get(path + query)
            requests += 1
            if problem := check_answer(response, query, "GET", path):
                problems.append(problem)
    fivexx = sum(" server error " in p for p in problems)
    record("requests", requests, "hostile input")
    record("5xx answers", fivexx, "hostile input")
    record("unclear refusals", len(problems) - fivexx, "hostile input")
    assert problems == [], f"{len(problems)} problems:\n" + "\n".join(problems[:50])


# --- Servers that misbehave -------------------------------------------------------------------------

def _log_since(offset: int) -> str:
    with open(ARTIFACTS / "worker.log", "rb") as log:
        log.seek(offset)
        return log.read().decode("utf-8", "replace")


def _frames_settle(server: Server, quiet: float = 1.0, timeout: float = 60.0) -> None:
    """Wait until the worker has stopped writing this server's JSON-RPC frames: a flood that
    outlived its call is still being logged, and the test database's flush at teardown
    deadlocked with those INSERTs on PostgreSQL (a CI failure)."""
    last, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = RpcFrame.objects.filter(server=server).count()
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.2)


def test_servers_that_print_garbage_flood_hang_or_crash_end_each_call_with_a_clear_message(staff_user):
    server = Server.objects.create(name="hostile-stdio", transport="stdio", command=sys.executable,
                                   args=[server_path("hostile.py"), "--legacy"], owner=staff_user)
    offset = (ARTIFACTS / "worker.log").stat().st_size
    refresh_tools(server)
    outcomes = {}
    for label, tool, arguments in (("garbage on stdout", "garbage", {}), ("10,000 notifications", "flood", {"count": 10_000}),
                                   ("never answers", "hang", {}), ("crashes mid-call", "crash", {}),
                                   ("the next call, after the crash", "garbage", {})):
        started = time.monotonic()
        call = run_call(server, tool, arguments, user=staff_user)
        outcomes[label] = (call.status, call.error, round(time.monotonic() - started, 1))
    _frames_settle(server)
    print(json.dumps(outcomes, indent=1))
    for label, (status, error, seconds) in outcomes.items():
        record(f"{label}: status", status, "misbehaving servers")
        record(f"{label}: seconds", seconds, "misbehaving servers")
    assert outcomes["garbage on stdout"][0] == "succeeded", outcomes
    # The client logs every notification as a JSON-RPC frame before it reads the answer: on a
    # loaded machine (PostgreSQL under the suite) that can outlast the suite's 6 s call timeout.
    # Either way the call ends, with the answer or a clear timeout.
    flood_status, flood_error, _ = outcomes["10,000 notifications"]
    # Timed out is acceptable (on PostgreSQL the 10,000 notifications may outlast the 6 s timeout), with the
    # deadline's clear message ("no answer to tools/call within", or "no answer and no progress within").
    assert flood_status == "succeeded" or (flood_status == "timed_out" and "no answer" in flood_error
                                           and "within" in flood_error), outcomes
    assert outcomes["never answers"][0] == "timed_out" and "6" in outcomes["never answers"][1], outcomes
    assert outcomes["crashes mid-call"][0] == "failed" and outcomes["crashes mid-call"][1], outcomes
    assert outcomes["the next call, after the crash"][0] == "succeeded", outcomes
    log = _log_since(offset)
    record("tracebacks in the worker log", log.count("Traceback"), "misbehaving servers")
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]


# --- Script payloads on pages, in a real browser ------------------------------------------------------

SERVER_NAME = 'srv<b class="pwned">S</b><script>alert("srv")</script>'


@pytest.fixture(scope="module")
def hostile_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("hostile.py", "http")
    yield server
    server.stop()


def _look(page, url: str, shot, literal: str | None = None) -> list[str]:
    """Open `url`; what went wrong: a dialog, an injected element, the payload not shown as text."""
    problems: list[str] = []
    response = page.goto(url)
    page.wait_for_load_state("networkidle")
    if response.status >= 400:
        problems.append(f"{url}: answered {response.status}")
    if page.locator(".pwned").count():
        problems.append(f"{url}: an element from a payload was rendered")
    if literal and literal not in page.locator("body").inner_text():
        problems.append(f"{url}: the payload is not shown as text")
    page.screenshot(path=str(shot), full_page=True)
    return problems


def test_script_payloads_from_a_server_show_as_text_on_pages_and_in_the_admin(
        browser, live_app, user, admin_user, fake_llm, hostile_http, screenshots):
    from urllib.parse import quote

    server = Server.objects.create(name=SERVER_NAME, transport="streamable_http", url=hostile_http.url, owner=user)
    refresh_tools(server)
    tool = Tool.objects.get(server=server, name=HOSTILE_NAME)
    assert tool.description == f"Description {PAYLOAD}"
    manual = run_call(server, HOSTILE_NAME, {"q": PAYLOAD})
    assert manual.status == "succeeded", manual.error
    conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url,
                                               title=f"chat {PAYLOAD}")
    conversation.servers.set([server])
    llm_name = next(n for n, (_, t) in history.build(conversation).tool_map.items() if t == HOSTILE_NAME)
    fake_llm.script([{"tool_calls": [{"name": llm_name, "arguments": {"q": PAYLOAD}, "id": "h1"}]},
                     {"text": f"Answer {PAYLOAD}"}])

    dialogs: list[str] = []
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.fill("#composer-text", "run the hostile tool")
    page.press("#composer-text", "Enter")
    page.wait_for_selector(".tool-card .status.succeeded", timeout=30000)
    page.wait_for_selector(".msg.assistant >> text=Answer", timeout=30000)
    page.click(".tool-card .toggle button:has-text('Full result')")
    page.wait_for_selector(".tool-card .full-json >> text=PWNED", timeout=10000)
    problems = []
    # The model's Markdown may keep harmless tags (sanitised by DOMPurify); nothing else may.
    if page.locator(".pwned:not(.msg.assistant .pwned)").count() or page.locator(".msg script, .msg img[onerror]").count():
        problems.append("chat: an element from a payload was rendered")
    if '<b class="pwned">' not in page.locator(".tool-card").first.inner_text():
        problems.append("chat: the tool card does not show the payload as text")
    page.screenshot(path=str(screenshots / "hostile-chat.png"), full_page=True)

    literal = '<b class="pwned">'
    for name, url, shown in (
        ("home", "/", literal), ("servers", "/servers/", literal), ("server", f"/servers/{server.pk}/", literal),
        ("tool", f"/servers/{server.pk}/tools/{quote(HOSTILE_NAME, safe='')}/", literal),
        ("resources", f"/servers/{server.pk}/resources/", None), ("prompts", f"/servers/{server.pk}/prompts/", None),
        ("chats", "/chat/", literal), ("rpc-log", "/rpc-log/", None),
    ):
        problems += _look(page, live_app.url + url, screenshots / f"hostile-{name}.png", shown)
    page.context.close()

    page = login_page(browser, live_app, "root", "root-pass-123")
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    llm_call = calls_of(conversation).get()
    for name, url in (("server", f"/admin/tools/server/{server.pk}/change/"), ("servers", "/admin/tools/server/"),
                      ("tool", f"/admin/tools/tool/{tool.pk}/change/"), ("tools", "/admin/tools/tool/"),
                      ("call", f"/admin/tools/toolcall/{manual.pk}/change/"), ("llm-call", f"/admin/tools/toolcall/{llm_call.pk}/change/"),
                      ("calls", "/admin/tools/toolcall/"), ("conversation", f"/admin/chat/conversation/{conversation.pk}/change/"),
                      ("frames", "/admin/tools/rpcframe/")):
        problems += _look(page, live_app.url + url, screenshots / f"hostile-admin-{name}.png",
                          literal if name not in ("frames", "calls", "tools") else None)
    page.context.close()
    record("pages checked", 19, "hostile input")
    record("dialogs fired", len(dialogs), "hostile input")
    assert dialogs == [], dialogs
    assert problems == [], problems
