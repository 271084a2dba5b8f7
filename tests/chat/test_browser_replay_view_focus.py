"""The replay player with an App view that has focus (issue 28.11), in headless Chromium against
the real app, worker, drift MCP server (tests/mcp_servers/drift.py) and fake LLM.

A click inside a view moved the keyboard focus into its iframe, and ←/→/End stopped stepping;
the view's button that calls a tool got a bare error (the view showed "[ERROR]") and nothing
said the player never calls tools."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.chat.test_browser_replay import recorded
from tests.chat.test_replay import drift, drift_http, drift_server  # noqa: F401  (fixtures)
from tests.helpers import login_page
from tools.models import ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def test_player_keys_work_after_a_click_in_a_view_and_the_view_is_told_tools_are_not_called(
        browser, live_app, user, fake_llm, drift, drift_server, screenshots):
    conversation = recorded(user, fake_llm, drift_server)
    server_calls, rows = len(drift.calls()), ToolCall.objects.count()
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/chat/{conversation.pk}/replay/#step-3")
    position = page.locator("#position")
    expect(position).to_contain_text("Step 3 of 6")
    # The view's step stays on the page (above) as the player moves on.
    view = page.frame_locator(".replay-step.tool .widget-slot iframe").first.frame_locator("iframe")
    view.locator("#price", has_text="12").wait_for(timeout=20000)

    # The view's own button: the error it gets says why, and the player says it too.
    view.locator("#again").click()
    answer = view.locator("#again-result")
    expect(answer).to_contain_text("1: ERROR", timeout=10000)
    assert "never calls tools" in answer.inner_text(), answer.inner_text()
    refused = page.locator(".replay-step.current .view-refused")
    expect(refused).to_contain_text("quote", timeout=5000)
    assert "never calls tools" in refused.inner_text()
    page.locator(".replay-step.current .widget-slot").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "replay-player-view-refused.png"), full_page=True)

    # Focus is in the view's iframe now; the player's keys still step.
    assert page.evaluate("document.activeElement && document.activeElement.tagName") == "IFRAME"
    page.keyboard.press("ArrowRight")
    expect(position).to_contain_text("Step 4 of 6", timeout=5000)
    page.keyboard.press("End")
    expect(position).to_contain_text("Step 6 of 6", timeout=5000)
    page.keyboard.press("ArrowLeft")
    expect(position).to_contain_text("Step 5 of 6", timeout=5000)

    # Typing in the view's own text field stays the view's: no step moves.
    view.locator("#note").click()
    page.keyboard.type("abc")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("End")
    assert view.locator("#note").input_value() == "abc"
    expect(position).to_contain_text("Step 5 of 6")

    # And nothing ran: the server logged no tools/call, no call row was made.
    assert len(drift.calls()) == server_calls, drift.calls()[server_calls:]
    assert ToolCall.objects.count() == rows
    page.context.close()
