"""What the chat tells you while a turn runs, and the conversation list (issue 28.12), in
headless Chromium against the real app, worker, basic MCP server and the recording fake LLM.

The header said "thinking…" for the whole of a 70 s tool call; it now names the tool that runs
and how long it has run. The list repeated identical titles with no server names."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chat.models import Conversation
from tests.chat.test_browser import make_conversation, open_chat, send
from tests.helpers import login_page, refresh_tools

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def test_header_names_the_running_tool_with_its_elapsed_time(browser, live_app, user, fake_llm, basic_server, screenshots):
    refresh_tools(basic_server)
    conversation = make_conversation(user, fake_llm, [basic_server])
    fake_llm.script([
        {"tool_calls": [{"name": "basic__slow", "arguments": {"seconds": 6}, "id": "s1"}]},
        {"text": "Done sleeping."},
    ])
    page = open_chat(browser, live_app, conversation)
    send(page, "take your time")
    state = page.locator("#turn-state")
    # While the call runs: the tool, its server and a ticking counter, not "thinking…".
    expect(state).to_contain_text(re.compile(r" · [2-4] s"), timeout=20000)
    text = state.inner_text()
    assert "basic" in text and "slow" in text and "thinking" not in text, text
    seen = int(re.search(r"running .*slow.* · (\d) s", text).group(1))
    page.screenshot(path=str(screenshots / "chat-turn-state-tool.png"))
    # It ticks: a later second shows while the 6 s call still runs.
    expect(state).to_contain_text(re.compile(rf" · [{seen + 1}-5] s"), timeout=5000)
    # Back to the model, then done.
    page.wait_for_selector(".msg.assistant >> text=Done sleeping.", timeout=30000)
    expect(state).to_have_text("", timeout=10000)
    page.context.close()


def test_conversation_list_shows_servers_and_tells_identical_titles_apart(browser, live_app, user, fake_llm, basic_server,
                                                                          app_server, screenshots):
    first = make_conversation(user, fake_llm, [basic_server], title="please echo")
    second = make_conversation(user, fake_llm, [basic_server, app_server], title="please echo")
    other = make_conversation(user, fake_llm, [], title="something else")
    imported = Conversation.objects.create(owner=user, model="openai/test-model", title="please echo", read_only=True,
                                           imported={"servers": [{"name": "checkout"}]})
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/chat/")
    page.locator(".servers").first.wait_for(timeout=5000)

    def row(conversation):
        return page.locator(f"tr[data-conversation='{conversation.pk}']")

    assert row(first).locator(".servers").inner_text().split() == ["basic"]
    assert sorted(row(second).locator(".servers").inner_text().split()) == ["apps", "basic"]
    assert row(imported).locator(".servers").inner_text().split() == ["checkout"]
    assert row(other).locator(".servers").inner_text().strip() == "none"
    # The three rows titled "please echo" are told apart by when they started (and their number).
    labels = [row(c).locator("td.title").inner_text() for c in (first, second, imported)]
    assert len(set(labels)) == 3, labels
    for c, label in zip((first, second, imported), labels):
        assert f"#{c.pk}" in label and "started" in label, label
    assert "started" not in row(other).locator("td.title").inner_text()  # a unique title needs nothing more
    page.screenshot(path=str(screenshots / "chat-list-servers.png"), full_page=True)
    page.context.close()


def test_a_late_first_load_does_not_undo_a_turn_started_since(browser, live_app, user, fake_llm, basic_server):
    """The page's first load of the conversation (sent when its socket opens) can answer after
    the user has already sent a message: its "idle", read before that turn began, hid Stop and
    dropped the streamed card while the turn ran (a CI failure of
    test_a_stopped_turn_removes_the_streamed_card). The first load is held here until the turn's
    card streams, then answered with what it read."""
    refresh_tools(basic_server)
    conversation = make_conversation(user, fake_llm, [basic_server])
    fake_llm.script([{"tool_calls": [{"name": "basic__echo", "arguments": {"text": "y" * 200}, "id": "z1"}], "chunk_delay": 0.3}])
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    held = []

    def hold_first_load(route):
        if route.request.method == "GET" and not held:
            held.append((route, route.fetch()))  # read now: the conversation is idle
        else:
            route.continue_()

    page.route(re.compile(rf"/api/conversations/{conversation.pk}/$"), hold_first_load)
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    send(page, "start and stop")
    page.wait_for_selector(".tool-card .status.streaming", timeout=20000)
    assert len(held) == 1
    route, response = held[0]
    assert response.json()["status"] != "running"
    route.fulfill(response=response)
    page.wait_for_timeout(500)  # the late answer is applied
    assert page.locator("#stop").is_visible(), "Stop hidden while the turn runs"
    assert page.locator(".tool-card").count() == 1
    page.click("#stop")
    page.wait_for_selector("#turn-notice >> text=Stopped.", timeout=20000)
    page.context.close()
