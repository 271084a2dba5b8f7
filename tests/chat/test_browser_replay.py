"""Headless Chromium on the replay pages: the player steps through a recorded conversation by
keyboard and buttons and re-renders its App view from the stored result without calling any
tool (the MCP server's own log says so); the run page shows the diff of a re-run."""

from __future__ import annotations

import pytest

from chat.tool_calls import calls_of
from chat.models import Conversation
from tests.helpers import login_page, wait_for
from tests.chat.test_replay import VOLATILE, drift, drift_http, drift_server  # noqa: F401  (fixtures)
from tools.models import ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def recorded(user, fake_llm, server) -> Conversation:
    """A conversation recorded through the real agent loop: one App call and one plain call."""
    from chat.tasks import begin_turn

    conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url, api_key="sk-test",
                                               title="Fruit prices")
    conversation.servers.set([server])
    fake_llm.script([
        {"text": "Let me look that up.", "tool_calls": [{"name": "drift__show_quote", "arguments": {"item": "mango"}, "id": "m1"}],
         "usage": {"prompt_tokens": 40, "completion_tokens": 6}},
        {"tool_calls": [{"name": "drift__quote", "arguments": {"item": "lime"}, "id": "l1"}]},
        {"text": "A mango costs 12 and a lime 12."},
    ])
    begin_turn(conversation, "What do a mango and a lime cost?")
    wait_for(lambda: not Conversation.objects.filter(pk=conversation.pk, status="running").exists(), timeout=40,
             message="the recorded turn")
    assert calls_of(conversation).filter(status="succeeded").count() == 2
    return conversation


def test_player_steps_through_and_renders_the_app_view_without_calling_a_tool(browser, live_app, user, fake_llm, drift,
                                                                              drift_server, screenshots):
    conversation = recorded(user, fake_llm, drift_server)
    drift.set_price(77)  # what the server would answer today: the player must show the recorded 12
    server_calls, llm_requests, rows = len(drift.calls()), len(fake_llm.requests), ToolCall.objects.count()

    page = login_page(browser, live_app, "alice", "alice-pass-123")
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{live_app.url}/chat/{conversation.pk}/replay/")
    page.wait_for_selector(".replay-step.current.user >> text=What do a mango and a lime cost?")
    assert page.inner_text("#position").startswith("Step 1 of 6")
    assert page.locator(".replay-step.assistant").count() == 0  # not revealed yet

    page.keyboard.press("ArrowRight")
    page.wait_for_selector(".replay-step.current.assistant >> text=Let me look that up.")
    assert "40 prompt + 6 completion tokens" in page.inner_text(".replay-step.current .step-figures")
    page.click("#next")
    tool = page.wait_for_selector(".replay-step.current.tool")
    assert "drift/show_quote" in tool.inner_text()
    # Full result and projection side by side: the price only in the full result.
    page.wait_for_selector(".replay-step.current .full-result >> text=\"price\": 12")
    assert page.inner_text(".replay-step.current .projection-text") == "Quote for mango"
    # The App view, rendered from the stored full result.
    view = page.frame_locator(".replay-step.current .widget-slot iframe").frame_locator("iframe")
    view.locator("#price", has_text="12").wait_for(timeout=20000)
    assert view.locator("#item").inner_text() == "mango"
    # The view tried a tools/call: the player's host refuses it (not supported).
    view.locator("#call-result", has_text="REFUSED").wait_for(timeout=10000)
    page.locator(".replay-step.current .widget-slot").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "replay-player.png"), full_page=True)

    page.keyboard.press("ArrowDown")  # next turn: there is none, so the last step
    page.wait_for_selector(".replay-step.current.assistant >> text=A mango costs 12 and a lime 12.")
    assert page.inner_text("#position").startswith("Step 6 of 6")
    assert page.is_disabled("#next")
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector(".replay-step.current.tool >> text=drift/quote")
    assert page.locator(".replay-step.assistant >> text=A mango costs").is_hidden()
    page.keyboard.press("Home")
    page.wait_for_selector(".replay-step.current.user")
    page.click(".step-link.tool >> text=drift/quote")
    page.wait_for_selector(".replay-step.current .projection-text >> text=Quote for lime")
    page.screenshot(path=str(screenshots / "replay-player-step.png"), full_page=True)

    # Nothing ran: the MCP server logged no tools/call, the model got no request, no call row was made.
    assert len(drift.calls()) == server_calls, drift.calls()[server_calls:]
    assert len(fake_llm.requests) == llm_requests and ToolCall.objects.count() == rows
    assert not [e for e in errors if "Content Security Policy" in e], errors
    page.context.close()


def test_run_page_shows_the_diff_of_a_rerun(browser, live_app, user, fake_llm, drift, drift_server, screenshots):
    conversation = recorded(user, fake_llm, drift_server)
    drift.set_price(13)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/chat/{conversation.pk}/replays/")
    page.fill("#ignore-paths", "\n".join(VOLATILE))
    page.click("#recorded-form button.primary")
    # The run page refreshes itself until the run has ended.
    page.wait_for_selector("#run-verdict.different", timeout=40000)
    items = page.locator(".replay-item")
    assert items.count() == 2
    for i in range(2):
        item = items.nth(i)
        assert item.get_attribute("data-verdict") == "different"
        full = item.locator("[data-diff=full]")
        assert full.get_attribute("data-changes") == "1"
        assert full.locator(".diff-path").inner_text() == "$.structuredContent.price"
        assert full.locator("code.old").inner_text() == "12" and full.locator("code.new").inner_text() == "13"
        assert item.locator("[data-diff=projection]").get_attribute("data-changes") == "0"
    assert "2 ignored" in page.inner_text("#item-1 [data-diff=full]")
    page.screenshot(path=str(screenshots / "replay-run-diff.png"), full_page=True)

    page.goto(f"{live_app.url}/chat/{conversation.pk}/replays/")
    page.wait_for_selector("#runs .verdict.different")
    page.screenshot(path=str(screenshots / "replay-runs.png"), full_page=True)
    page.context.close()
