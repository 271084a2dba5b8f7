"""Headless Chromium: the model calls a tool the App view registered (issue 15.4). The chat page
that shows the view runs it in the view; the call is stored like any (origin "view"), and the
model gets what the view answered."""

from __future__ import annotations

import json

import pytest

from chat.models import Conversation, ViewTools
from tests.chat.test_browser import make_conversation, open_chat, send, widget_frame
from tests.helpers import refresh_tools, wait_for
from tools.models import ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def test_the_model_calls_a_tool_the_view_registered(browser, live_app, user, fake_llm, app_server, screenshots):
    refresh_tools(app_server)
    conversation = make_conversation(user, fake_llm, [app_server])
    fake_llm.script([{"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": "v"}, "id": "m1"}]}, {"text": "Shown."}])
    page = open_chat(browser, live_app, conversation)
    send(page, "show the marker")
    view = widget_frame(page)
    view.locator("#secret", has_text="STRUCTURED-MARKER-v").wait_for(timeout=30000)
    page.wait_for_selector(".msg.assistant >> text=Shown.", timeout=30000)
    # The page recorded the view's own tools; they are not offered until the conversation says so.
    recorded = wait_for(lambda: ViewTools.objects.filter(conversation=conversation).first(), message="the view's tools")
    assert [t["name"] for t in recorded.tools] == ["marker_echo"]
    assert "view_show_marker__marker_echo" not in json.dumps(fake_llm.bodies[-1]["tools"])
    page.check("#offer-view-tools")
    wait_for(lambda: Conversation.objects.get(pk=conversation.pk).offer_view_tools, message="the setting saved")

    fake_llm.script([{"tool_calls": [{"name": "view_show_marker__marker_echo", "arguments": {"text": "hello"}, "id": "e1"}]},
                     {"text": "The view echoed."}])
    send(page, "use the view's own tool")
    page.wait_for_selector(".msg.assistant >> text=The view echoed.", timeout=30000)
    call = ToolCall.objects.get(origin="view")
    assert call.status == "succeeded" and call.view_call.tool_name == "show_marker" and call.tool_name == "marker_echo"
    assert call.full_result.raw["structuredContent"] == {"echo": "hello", "calls": 1}
    # The view ran it exactly once, and the model was offered the tool and told the view's answer.
    assert view.locator("#view-calls").inner_text() == "1 hello"
    offered = [t["function"]["name"] for t in fake_llm.bodies[-2]["tools"]]
    assert "view_show_marker__marker_echo" in offered
    last = json.dumps(fake_llm.bodies[-1]["messages"])
    assert "VIEW-TOOL-hello" in last and '"calls": 1' not in last  # structuredContent stays out of the model's view
    page.wait_for_selector(f".tool-card[data-tool-call='{call.pk}'] .status.succeeded")
    assert page.locator(f".tool-card[data-tool-call='{call.pk}'] .name").inner_text() == "App view · marker_echo"
    page.screenshot(path=str(screenshots / "chat-view-tool.png"), full_page=True)
    # In a chat, a view's ui/download-file asks first; declined, the view is told so.
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    view.locator("#download").click()
    view.locator("#download-result", has_text="ERROR: refused").wait_for(timeout=10000)
    assert "report.txt" in asked[0]
    page.context.close()


def test_a_page_opened_while_the_call_waits_runs_it(browser, live_app, user, fake_llm, app_server):
    """The view's tool is called while no page shows the view; a page opened then runs it."""
    refresh_tools(app_server)
    app_server.call_timeout = 60
    app_server.save()
    conversation = make_conversation(user, fake_llm, [app_server], offer_view_tools=True)
    fake_llm.script([{"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": "w"}, "id": "m1"}]}, {"text": "Shown."}])
    page = open_chat(browser, live_app, conversation)
    send(page, "show the marker")
    page.wait_for_selector(".msg.assistant >> text=Shown.", timeout=30000)
    wait_for(lambda: ViewTools.objects.filter(conversation=conversation).exists(), message="the view's tools")
    page.goto(f"{live_app.url}/")  # no page shows the view now

    fake_llm.script([{"tool_calls": [{"name": "view_show_marker__marker_echo", "arguments": {"text": "late"}, "id": "e1"}]},
                     {"text": "Done late."}])
    from chat import tasks
    tasks.begin_turn(conversation, "use it")
    call = wait_for(lambda: ToolCall.objects.filter(origin="view", status="running").first(), message="the view call to wait")
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector(".msg.assistant >> text=Done late.", timeout=30000)
    call.refresh_from_db()
    assert call.status == "succeeded" and call.full_result.raw["structuredContent"]["echo"] == "late"
    page.context.close()
