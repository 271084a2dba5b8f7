"""Headless Chromium: what a server asks mid-call shows as a card (tool page and chat), the answer
reaches the server through the waiting worker; the progress bar and the server log fill live.

A worker of this module's own takes the tool calls, with a call timeout a person (here:
Playwright) can answer within on a busy machine; the suite's worker stops consuming `tools`
meanwhile."""

from __future__ import annotations

import json
import uuid

import pytest

from chat.tool_calls import conversation_key
from chat.models import Conversation
from tests.helpers import stop_process, login_page, refresh_tools, start_worker, wait_for
from tools.models import Server, ServerLogMessage, ServerRequest, ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def asks_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("asks.py", "http", "--legacy")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def patient_worker(celery_worker, django_db_blocker):
    from inspector.celery import app

    app.control.cancel_consumer("tools", destination=[celery_worker.hostname], reply=True)
    with django_db_blocker.unblock():
        worker = start_worker(f"patient-{uuid.uuid4().hex[:8]}@localhost",
                              {"MCP_CALL_TIMEOUT": "40", "SWEEP_INTERVAL": "3600"}, "patient-worker.log")
    yield worker
    app.control.add_consumer("tools", destination=[celery_worker.hostname], reply=True)
    stop_process(worker)


@pytest.fixture
def asks(asks_server_http, user, patient_worker):
    server = Server.objects.create(name="asks", transport="streamable_http", url=asks_server_http.url, owner=user)
    refresh_tools(server)
    return server


def open_tool(browser, live_app, server, tool: str, arguments: dict):
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{server.pk}/tools/{tool}/")
    page.click("[data-mode=json]")
    page.fill("#raw-args", json.dumps(arguments))
    page.click("#run-tool")
    return page


def test_tool_page_elicitation_form_and_hostile_url(browser, live_app, asks, screenshots):
    page = open_tool(browser, live_app, asks, "ask_form", {"question": "Who are you?"})
    card = page.wait_for_selector(".server-request.pending form.elicitation-form", timeout=20000)
    assert "Who are you?" in page.inner_text(".server-request .message")
    page.fill(".server-request input[name=name]", "Ann")
    page.fill(".server-request input[name=age]", "41")
    page.select_option(".server-request select[name=colour]", "green")
    page.check(".server-request input[name=subscribe]")
    page.screenshot(path=str(screenshots / "elicitation-tool-page.png"), full_page=True)
    card.query_selector("button.primary").click()
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    page.wait_for_selector("#full-result >> text=accept", timeout=10000)
    assert 'accept {\\"age\\": 41, \\"colour\\": \\"green\\", \\"name\\": \\"Ann\\", \\"subscribe\\": true}' in page.inner_text("#full-result")
    page.wait_for_selector(".server-request.answered")
    assert page.locator("#cancel-tool").is_hidden()

    # A URL-mode request to javascript: is refused before anyone sees a link.
    page.goto(f"{live_app.url}/servers/{asks.pk}/tools/ask_url/")
    page.click("[data-mode=json]")
    page.fill("#raw-args", json.dumps({"url": "javascript:alert(document.cookie)"}))
    page.click("#run-tool")
    page.wait_for_selector(".server-request.refused", timeout=20000)
    assert "Only http and https URLs" in page.inner_text(".server-request.refused .error")
    assert page.locator("a[href^='javascript']").count() == 0
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    page.screenshot(path=str(screenshots / "elicitation-refused-url.png"), full_page=True)
    page.context.close()


def test_tool_page_progress_bar_log_and_cancel(browser, live_app, asks, screenshots):
    page = open_tool(browser, live_app, asks, "progress", {"steps": 6, "delay": 0.5})
    page.wait_for_selector("#run-progress progress", timeout=20000)
    wait_for(lambda: page.locator("#run-logs li").count() >= 2, timeout=20, message="live log lines")
    page.click("#run-logs summary")
    page.screenshot(path=str(screenshots / "progress-tool-page.png"), full_page=True)
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    page.wait_for_selector("#run-progress .progress-text >> text=6 / 6 (100%) — step 6 of 6")
    assert page.get_attribute("#run-progress progress", "value") == "6"
    assert page.locator("#run-logs li").count() == 6
    assert "working on step 6" in page.inner_text("#run-logs")

    # Cancel a running call: it ends `cancelled`.
    page.goto(f"{live_app.url}/servers/{asks.pk}/tools/wait/")
    page.click("[data-mode=json]")
    page.fill("#raw-args", json.dumps({"seconds": 20, "tag": "browser"}))
    page.click("#run-tool")
    page.wait_for_selector("#run-status.running", timeout=20000)
    page.click("#cancel-tool")
    page.wait_for_selector("#run-status.cancelled", timeout=10000)
    assert ToolCall.objects.filter(tool_name="wait", status="cancelled").exists()
    page.context.close()


def test_a_quick_call_comes_back_in_the_posts_answer_with_its_logs_and_nothing_asked_twice(browser, live_app, asks, screenshots):
    """The tool page POSTs with ?wait=0.5 (issue 31: click → result): a call that ends that soon is
    shown from the answer, without a subscription; its logs are still read (the answer says it
    has some), and a call without any makes no other request to the API."""
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{asks.pk}/tools/progress/")
    asked: list[str] = []
    page.on("request", lambda request: "/api/" in request.url and asked.append(f"{request.method} {request.url.split('/api/', 1)[1]}"))
    sent: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(str(payload))))
    post = f"POST servers/{asks.pk}/tools/progress/call/?wait=0.5"

    def run(arguments: dict, n: int) -> ToolCall:
        page.fill("#raw-args", json.dumps(arguments))
        page.click("#run-tool")
        wait_for(lambda: ToolCall.objects.filter(tool_name="progress").count() == n, message=f"call {n}")
        page.wait_for_selector("#run-status.succeeded", timeout=20000)
        call = ToolCall.objects.filter(tool_name="progress").order_by("-queued_at").first()
        # The quick path needs the call to end within the page's wait (a warm connection: ~20 ms).
        assert call.duration_ms < 500, f"the call took {call.duration_ms} ms, over the page's wait"
        return call

    page.click("[data-mode=json]")
    run({"steps": 0, "delay": 0}, 1)  # the worker connects to the server once
    asked.clear()
    call = run({"steps": 2, "delay": 0}, 2)
    wait_for(lambda: page.locator("#run-logs li").count() == 2, timeout=10, message="the call's two log lines")
    page.wait_for_selector("#run-progress .progress-text >> text=2 / 2 (100%)")
    page.click("#run-logs summary")
    page.screenshot(path=str(screenshots / "quick-call-tool-page.png"), full_page=True)
    assert asked[0] == post, asked
    assert f"GET tool-calls/{call.pk}/logs/" in asked
    assert not [frame for frame in sent if str(call.pk) in frame], sent  # never subscribed to

    ServerLogMessage.objects.all().delete()
    asked.clear()
    run({"steps": 0, "delay": 0}, 3)
    page.wait_for_timeout(500)  # what the page would ask after showing the result
    assert asked == [post], asked
    page.context.close()


def ask_in_chat(browser, live_app, user, fake_llm, server, script: list[dict]):
    """A conversation with `server` whose model follows `script`; its page, after sending "ask me"."""
    conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url, api_key="sk-test")
    conversation.servers.set([server])
    fake_llm.script(script)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.fill("#composer-text", "ask me")
    page.press("#composer-text", "Enter")
    return conversation, page


def test_chat_card_elicitation_is_answered_in_place(browser, live_app, user, fake_llm, asks, screenshots):
    conversation, page = ask_in_chat(browser, live_app, user, fake_llm, asks, [
        {"text": "Let me ask.", "tool_calls": [{"name": "asks__ask_form", "arguments": {"question": "Your name, please?"}, "id": "q1"}]},
        {"text": "Thanks, **Bea**."},
    ])
    card = page.wait_for_selector(".tool-card .server-request.pending form", timeout=20000)
    assert "Your name, please?" in page.inner_text(".tool-card .server-request .message")
    # The call is `running` (its worker waits for the answer), yet the turn waits for you.
    page.wait_for_selector("#turn-state.input_required >> text=waiting for your input…", timeout=10000)
    page.fill(".tool-card .server-request input[name=name]", "Bea")
    page.screenshot(path=str(screenshots / "elicitation-chat.png"), full_page=True)
    card.query_selector("button.primary").click()
    page.wait_for_selector(".tool-card .status.succeeded", timeout=20000)
    page.wait_for_selector(".msg.assistant strong >> text=Bea", timeout=20000)
    page.wait_for_selector("#turn-state:not(.input_required):not(.running)", state="attached", timeout=10000)
    assert ServerRequest.objects.get(tool_call__caller=conversation_key(conversation.pk)).action == "accept"
    page.screenshot(path=str(screenshots / "elicitation-chat-answered.png"), full_page=True)
    page.context.close()


# --- 2026-07-28: the call rests between rounds; the same cards -------------------------------------

@pytest.fixture(scope="module")
def rounds_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("rounds.py", "http")
    yield server
    server.stop()


def test_tool_page_answers_an_input_required_call_round_by_round(browser, live_app, rounds_server_http, user,
                                                                 patient_worker, screenshots):
    rounds = Server.objects.create(name="rounds", transport="streamable_http", url=rounds_server_http.url, owner=user)
    refresh_tools(rounds)
    page = open_tool(browser, live_app, rounds, "trip", {"topic": "browsers"})
    card = page.wait_for_selector(".server-request.elicitation.pending form.elicitation-form", timeout=20000)
    assert "Who is asking about browsers?" in page.inner_text(".server-request .message")
    page.wait_for_selector("#run-status.input_required >> text=waiting for your input", timeout=10000)
    call = ToolCall.objects.get(server=rounds, tool_name="trip")
    assert call.status == "input_required"  # resting: no worker holds it
    page.fill(".server-request input[name=name]", "Dee")
    card.query_selector("button.primary").click()
    # Round 2 asks the model: a sampling card on the same page; rejecting it ends the call.
    sampling = page.wait_for_selector(".server-request.sampling.pending", timeout=20000)
    page.screenshot(path=str(screenshots / "input-required-round-2.png"), full_page=True)
    sampling.query_selector("button:has-text('Reject')").click()
    page.wait_for_selector("#run-status.failed", timeout=20000)
    assert "was not answered: The user rejected the sampling request." in page.inner_text("#run-status")
    assert [r.round for r in ServerRequest.objects.filter(tool_call=call).exclude(kind="roots").order_by("round")] == [1, 2]


def test_chat_card_of_a_resting_call_is_answered_and_the_turn_goes_on(browser, live_app, rounds_server_http, user,
                                                                      patient_worker, fake_llm, screenshots):
    rounds = Server.objects.create(name="rounds", transport="streamable_http", url=rounds_server_http.url, owner=user)
    refresh_tools(rounds)
    _, page = ask_in_chat(browser, live_app, user, fake_llm, rounds, [
        {"text": "Let me ask.", "tool_calls": [{"name": "rounds__trip", "arguments": {"topic": "chats"}, "id": "r1"}]},
        {"text": "You **declined**, fine."},
    ])
    card = page.wait_for_selector(".tool-card .server-request.pending form", timeout=20000)
    assert "Who is asking about chats?" in page.inner_text(".tool-card .server-request .message")
    page.wait_for_selector(".tool-card .status.input_required >> text=waiting for input", timeout=10000)
    # The header says what the turn waits for: you, not the model.
    page.wait_for_selector("#turn-state.running.input_required >> text=waiting for your input…", timeout=10000)
    page.screenshot(path=str(screenshots / "input-required-chat.png"), full_page=True)
    assert len(fake_llm.requests) == 1  # the turn waits for the resting call
    card.query_selector("button:has-text('Decline')").click()
    page.wait_for_selector(".tool-card .status.succeeded", timeout=20000)
    page.wait_for_selector(".msg.assistant strong >> text=declined", timeout=20000)
    page.wait_for_selector("#turn-state:not(.input_required):not(.running)", state="attached", timeout=10000)
    tool_message = [m for m in fake_llm.requests[-1]["body"]["messages"] if m.get("role") == "tool"]
    assert tool_message and tool_message[0]["content"] == "declined"
    page.context.close()
