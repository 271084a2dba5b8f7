"""The chat page on the paginated conversation API, in real Chromium: a reconnecting page asks
only for what is new and shows every message exactly once; a long conversation opens on its
newest page and loads older messages on request."""

from __future__ import annotations

import pytest

from chat.models import Message
from tests.helpers import login_page, refresh_tools, wait_for, wait_for_js
from tests.chat.test_browser import make_conversation, send
from tests.tools.test_events import build_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Keeps every WebSocket the page opens, and can refuse new ones: they go to a path the server
# does not route, so the handshake fails as if the server were unreachable and the page's
# socket retries with backoff. (Not another port: the page's CSP blocks that, and Chromium
# 156 then never fires the socket's close event, so nothing would retry.)
SOCKET_CONTROL = """
(() => {
  const Real = window.WebSocket;
  window.__sockets = [];
  window.__refuseSockets = false;
  window.WebSocket = function (url, protocols) {
    const ws = new Real(window.__refuseSockets ? new URL("/ws/unrouted/", url).href : url, protocols);
    window.__sockets.push(ws);
    return ws;
  };
  window.WebSocket.prototype = Real.prototype;
  Object.assign(window.WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
})();
"""


def shown_messages(page) -> list[str]:
    texts = page.locator("#messages .msg:not(.streaming) .body").all_inner_texts()
    return [t.strip() for t in texts if t.strip()]  # an assistant message that only calls tools is hidden


@pytest.mark.usefixtures("celery_worker")
def test_a_reconnecting_page_loads_only_what_is_new_and_shows_it_once(browser, live_app, user, api, fake_llm, basic_server):
    refresh_tools(basic_server)
    conversation = make_conversation(user, fake_llm, [basic_server])
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.add_init_script(SOCKET_CONTROL)
    loads: list[str] = []
    page.on("request", lambda r: loads.append(r.url.split("/api/conversations/", 1)[1])
            if f"/api/conversations/{conversation.pk}/" in r.url and "messages" not in r.url and "llm-messages" not in r.url else None)
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    fake_llm.script([{"tool_calls": [{"name": "basic__echo", "arguments": {"text": "first echo"}, "id": "r1"}]},
                     {"text": "First answer."}])
    send(page, "first question")
    page.wait_for_selector(".msg.assistant >> text=First answer.", timeout=30000)
    wait_for_js(page, "!document.getElementById('turn-state').classList.contains('running')")
    last_seq = Message.objects.filter(conversation=conversation).order_by("-seq").first().seq

    # The socket drops and cannot come back while a whole turn happens elsewhere.
    page.evaluate("window.__refuseSockets = true; window.__sockets.forEach(s => s.close())")
    page.wait_for_selector("#conn-state.warn")
    fake_llm.script([{"tool_calls": [{"name": "basic__echo", "arguments": {"text": "second echo"}, "id": "r2"}]},
                     {"text": "Second answer, while you were away."}])
    assert api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "second question"}).status_code == 202
    wait_for(lambda: api.get(f"/api/conversations/{conversation.pk}/").json()["status"] == "idle", message="the turn to end")
    assert page.locator(".msg.assistant >> text=Second answer").count() == 0

    loads.clear()
    page.evaluate("window.__refuseSockets = false")
    page.wait_for_selector(".msg.assistant >> text=Second answer, while you were away.", timeout=30000)
    page.wait_for_selector("#conn-state.ok")
    # Nothing is missing or shown twice, and only what was new was asked for.
    stored = [m.text for m in Message.objects.filter(conversation=conversation, role__in=["user", "assistant"]).exclude(text="")]
    wait_for(lambda: shown_messages(page) == stored, timeout=10, message=f"{stored} shown once each")
    assert loads and loads[0] == f"{conversation.pk}/?after={last_seq}", loads
    cards = page.locator(".tool-card")
    assert cards.count() == 2 and page.locator(".tool-card .status.succeeded").count() == 2
    cards.nth(1).locator(".toggle button:has-text('Full result')").click()
    cards.nth(1).locator(".full-json", has_text="second echo").wait_for(timeout=10000)
    page.context.close()


def test_a_long_conversation_opens_on_its_newest_page_and_loads_older_on_request(browser, live_app, user, basic_server):
    conversation = build_conversation(user, basic_server, calls=90, raw_bytes=200, text_chars=40)  # 270 messages
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.wait_for_selector("#messages .msg.user >> text=question 89")
    # The newest 200 messages: 67 of the 90 tool calls, 66 user questions.
    assert page.locator("#messages .msg.user").count() == 66 and page.locator(".tool-card").count() == 67
    assert page.locator("#messages .msg.user >> text=question 23").count() == 0
    page.click("#load-older")
    page.wait_for_selector("#messages .msg.user >> text=question 0")
    questions = page.locator("#messages .msg.user .body").all_inner_texts()
    assert questions == [f"question {i}" for i in range(90)]
    assert page.locator(".tool-card").count() == 90 and page.locator("#load-older").is_hidden()
    page.context.close()
