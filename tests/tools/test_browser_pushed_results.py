"""Headless Chromium: pages and App views use the full result their `tool_call.result` event
pushed (issue 25.5) and fetch `result_url` only for a result over WS_INLINE_RESULT_MAX_BYTES
(512 KiB by default). Every request the page makes is recorded; the marker view shows what it
got (content, structuredContent, _meta). Real daphne, worker, MCP App server, fake LLM."""

from __future__ import annotations

import re

import pytest

from tests.chat.test_browser import make_conversation, open_chat, send, widget_frame
from tests.helpers import login_page, refresh_tools
from chat.tool_calls import calls_of
from tools.models import ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

RESULT_URL = re.compile(r"/api/tool-calls/([0-9a-f-]+)/result/")
OVER = 0.6  # MiB: a big_view result of 629,145 characters of data, over 512 KiB
OVER_CHARS = int(OVER * 1024 * 1024)


def record_result_fetches(page) -> list[str]:
    """The ids of the calls whose result_url the page (or any of its frames) requested."""
    fetched: list[str] = []
    page.on("request", lambda request: (m := RESULT_URL.search(request.url)) and fetched.append(m.group(1)))
    return fetched


def test_chat_view_and_card_use_the_pushed_result(browser, live_app, user, fake_llm, app_server, screenshots):
    refresh_tools(app_server)
    conversation = make_conversation(user, fake_llm, [app_server])
    fake_llm.script([
        {"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": "pushed"}, "id": "p1"}]},
        {"text": "Shown."},
    ])
    page = open_chat(browser, live_app, conversation)
    fetched = record_result_fetches(page)
    send(page, "show it")
    view = widget_frame(page)
    view.locator("#secret", has_text="STRUCTURED-MARKER-pushed").wait_for(timeout=30000)
    assert view.locator("#meta").inner_text() == "META-MARKER-pushed"
    assert view.locator("#content").inner_text() == "CONTENT-MARKER-pushed"
    page.wait_for_selector(".msg.assistant >> text=Shown.", timeout=30000)
    # The card's full result too: shown from the push.
    page.click(".tool-card .toggle button:has-text('Full result')")
    page.wait_for_selector(".tool-card .full-json >> text=META-MARKER-pushed", timeout=10000)
    page.screenshot(path=str(screenshots / "pushed-result-chat.png"), full_page=True)
    assert fetched == [], f"the page fetched result_url of {fetched}"
    page.context.close()


def test_chat_view_of_a_result_over_the_limit_is_fetched_and_rendered(browser, live_app, user, fake_llm, app_server):
    refresh_tools(app_server)
    conversation = make_conversation(user, fake_llm, [app_server])
    fake_llm.script([
        {"tool_calls": [{"name": "apps__big_view", "arguments": {"size_mb": OVER}, "id": "b1"}]},
        {"text": "Big one shown."},
    ])
    page = open_chat(browser, live_app, conversation)
    fetched = record_result_fetches(page)
    send(page, "show a big one")
    view = widget_frame(page)
    view.locator("#data-length", has_text=str(OVER_CHARS)).wait_for(timeout=30000)
    assert view.locator("#data-tail").inner_text() == f"END{OVER_CHARS:013d}"[-16:]
    call = calls_of(conversation).get(tool_name="big_view")
    assert call.full_result.size_bytes > 512 * 1024
    assert fetched == [str(call.pk)]
    page.context.close()


def test_the_tool_page_uses_the_pushed_result_and_fetches_a_big_one(browser, live_app, user, app_server):
    refresh_tools(app_server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    fetched = record_result_fetches(page)
    page.goto(f"{live_app.url}/servers/{app_server.pk}/tools/show_marker/")
    page.locator("#schema-form input[name=label]").fill("page")
    page.locator("#run-tool").click()
    view = page.frame_locator("#run-view iframe").frame_locator("iframe")
    view.locator("#secret", has_text="STRUCTURED-MARKER-page").wait_for(timeout=30000)
    assert view.locator("#meta").inner_text() == "META-MARKER-page"
    page.locator("#full-result", has_text="CONTENT-MARKER-page").wait_for(timeout=10000)
    assert fetched == [], f"the page fetched result_url of {fetched}"

    page.goto(f"{live_app.url}/servers/{app_server.pk}/tools/big_view/")
    page.locator("#schema-form input[name=size_mb]").fill(str(OVER))
    page.locator("#run-tool").click()
    view = page.frame_locator("#run-view iframe").frame_locator("iframe")
    view.locator("#data-length", has_text=str(OVER_CHARS)).wait_for(timeout=30000)
    call = ToolCall.objects.get(tool_name="big_view")
    assert fetched == [str(call.pk)]
    page.context.close()
