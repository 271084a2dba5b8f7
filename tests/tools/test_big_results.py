"""Big results through real Chromium: an App view gets a 5 MB and a 40 MB result complete, and
the tool page shows a 40 MB text result's summary and, on request, only its start (the whole is
a download), while the page's WebSockets carry only small events (daphne closes a socket at a
1 MiB frame)."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.helpers import login_page, refresh_tools, wait_for
from tests.chat.test_browser import make_conversation, send, widget_frame
from chat.tool_calls import calls_of
from tools.runtime import stored_result
from tools.models import ToolCall, ToolResult

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

FRAME_LIMIT = 64 * 1024


def record_websockets(page) -> list[int]:
    """Sizes of every frame the page receives on any WebSocket."""
    sizes: list[int] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: sizes.append(len(payload))))
    return sizes


def record_result_fetches(page) -> list[str]:
    urls: list[str] = []
    page.on("requestfinished", lambda request: urls.append(request.url) if "/result/" in request.url else None)
    return urls


@pytest.mark.parametrize("size_mb", [5, 40])
def test_an_app_view_gets_the_complete_big_result_over_http(browser, live_app, user, fake_llm, app_server, screenshots, size_mb):
    refresh_tools(app_server)
    conversation = make_conversation(user, fake_llm, [app_server])
    fake_llm.script([{"tool_calls": [{"name": "apps__big_view", "arguments": {"size_mb": size_mb}, "id": "big1"}]},
                     {"text": "The big view is shown."}])
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    frames = record_websockets(page)
    fetched = record_result_fetches(page)
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    send(page, "show something big")

    call = wait_for(lambda: calls_of(conversation).filter(tool_name="big_view").exclude(status__in=["queued", "running"]).first(),
                    timeout=90, message="the big call to end")
    assert call.status == "succeeded", call.error
    data = ToolResult.objects.get(tool_call=call).raw["structuredContent"]["data"]
    assert len(data) == size_mb * 1024 * 1024
    view = widget_frame(page)
    view.locator("#data-length", has_text=str(len(data))).wait_for(timeout=60000)
    # The view got all of it: every character (the sum of their codes) up to the end marker.
    assert view.locator("#data-sum").inner_text() == str(sum(data.encode()))
    assert view.locator("#data-tail").inner_text() == data[-16:]
    assert view.locator("#content").inner_text() == f"BIG-VIEW-{len(data)}"
    page.wait_for_selector(".msg.assistant >> text=The big view is shown.", timeout=30000)
    page.screenshot(path=str(screenshots / f"big-view-{size_mb}mb.png"), full_page=True)

    # It came over HTTP, once; the WebSocket only ever carried small events.
    assert fetched == [f"{live_app.url}/api/tool-calls/{call.pk}/result/"]
    assert frames and max(frames) < FRAME_LIMIT and sum(frames) < 1024 * 1024, (max(frames), sum(frames))
    # The card says how big the result is without loading it.
    card = page.locator(f'.tool-card[data-tool-call="{call.pk}"]')
    assert f"{size_mb}.0 MB" in card.locator(".saved").inner_text()
    assert card.locator(".full-json").is_hidden()
    page.context.close()


def test_the_tool_page_shows_the_start_of_a_40_mb_text_result_on_request(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    frames = record_websockets(page)
    fetched = record_result_fetches(page)
    answers: list[int] = []  # the POST's status: 200 if the call ended within its ?wait, else 202
    page.on("response", lambda response: answers.append(response.status) if "/call/?wait=" in response.url else None)
    page.goto(f"{live_app.url}/servers/{app_server.pk}/tools/big_text/")
    page.fill("#arg-size_mb", "40")
    page.click("#run-tool")
    page.wait_for_selector("#run-status.succeeded", timeout=90000)

    call = ToolCall.objects.get(tool_name="big_text")
    result = ToolResult.objects.get(tool_call=call)
    # A summary: sizes, tokens, and what the model saw (capped, saying so); no full result yet.
    assert "full 40.0 MB" in page.locator("#result-summary").inner_text()
    page.locator("#projection-text", has_text="cut to fit").wait_for(timeout=10000)
    assert page.locator("#full-result").is_hidden() and fetched == []
    assert page.locator("#show-full").inner_text() == "Show the start of the full result (40.0 MB)"
    assert page.locator("#download-full").get_attribute("href") == f"/api/tool-calls/{call.pk}/result/"

    # On request, its first RESULT_PREVIEW_BYTES as stored, saying so: never the 40 MB in the page.
    page.click("#show-full")
    page.locator("#full-result", has_text="as stored").wait_for(timeout=30000)
    shown = page.evaluate("document.getElementById('full-result').textContent")
    stored = stored_result.head(call.pk, settings.RESULT_PREVIEW_BYTES)[0]
    assert shown.startswith(stored) and len(shown) < len(stored) + 200
    assert shown.endswith("… the first 256.0 KB of 40.0 MB, as stored: “Download JSON” has all of it.")
    assert result.size_bytes > 40 * 1024 * 1024
    assert fetched == [f"{live_app.url}/api/tool-calls/{call.pk}/result/preview/"]
    page.screenshot(path=str(screenshots / "tool-page-big-result.png"))
    # Followed on the page's socket unless the call ended within the POST's ?wait (a fast machine
    # makes 40 MB in under 0.5 s): either way no frame carries the result.
    assert answers in ([200], [202])
    assert bool(frames) == (answers == [202]), (answers, len(frames))
    assert max(frames, default=0) < FRAME_LIMIT and sum(frames) < 1024 * 1024, (max(frames, default=0), sum(frames))
    page.context.close()
