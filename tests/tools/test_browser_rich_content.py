"""Headless Chromium: a result's content items rendered where results are shown (issue 15.7):
the tool page, a chat tool card and the admin's tool-call page. Images and audio play from
their data under the page's CSP, resource links lead to the resource page, embedded resources
show their MIME type, annotations show as badges; what the model saw does not change."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.helpers import login_page, refresh_tools, run_call, wait_for_js
from tests.inspector.test_pages_csp import chat_with, violations, watch_csp
from tools.models import Projection

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def assert_rendered(page, scope: str, server) -> None:
    items = page.locator(f"{scope} .rc-item")
    items.first.wait_for(timeout=30000)
    assert items.count() == 6
    types = page.locator(f"{scope} .rc-type").all_inner_texts()
    assert types == ["text", "image", "audio", "resource_link", "resource", "resource"]
    assert page.locator(f"{scope} .rc-item").nth(0).locator(".badge", has_text="audience: user").count() == 1
    assert page.locator(f"{scope} .rc-item").nth(0).locator(".badge", has_text="priority 0.9").count() == 1
    # The images decoded from their data (the item's and the embedded blob's).
    wait_for_js(page, f"[...document.querySelectorAll('{scope} img.rc-image')].every(i => i.complete && i.naturalWidth === 1)")
    assert page.locator(f"{scope} img.rc-image").count() == 2
    # The audio loaded its 10 ms of sound (metadata read from the data: URL).
    wait_for_js(page, f"document.querySelector('{scope} audio.rc-audio')?.readyState >= 1")
    duration = page.locator(f"{scope} audio.rc-audio").evaluate("a => a.duration")
    assert 0.005 < duration < 0.02
    link = page.locator(f"{scope} a.rc-link", has_text="hello")
    assert link.get_attribute("href") == f"/servers/{server.pk}/resources/?uri={quote('text://hello', safe='')}"
    embedded = page.locator(f"{scope} .rc-item").nth(4)
    assert embedded.locator(".rc-mime").inner_text() == "application/json"
    assert json.loads(embedded.locator("pre").inner_text()) == {"answer": 42}


def test_rich_results_on_the_tool_page_and_in_the_admin(browser, live_app, admin_user, basic_server, screenshots):
    basic_server.owner = admin_user
    basic_server.save()
    refresh_tools(basic_server)
    page = login_page(browser, live_app, "root", "root-pass-123")
    console = watch_csp(page)
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/tools/rich/")
    page.click("#run-tool")
    page.wait_for_selector("#run-status.succeeded", timeout=30000)
    assert_rendered(page, "#full-rendered", basic_server)
    page.locator("#full-rendered").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "tool-page-rich-content.png"))
    # The link opens the resource on its server's page.
    page.locator("#full-rendered a.rc-link", has_text="hello").click()
    page.wait_for_selector("text=hello world")
    assert violations(page, console) == []
    # The model's side is as before: text only, no media data.
    call = run_call(basic_server, "rich", {}, user=admin_user)
    text = Projection.objects.get(tool_call=call).text
    assert "RICH-TEXT" in text and "iVBORw0KGgo" not in text
    page.goto(f"{live_app.url}/admin/tools/toolcall/{call.pk}/change/")
    assert_rendered(page, "#full-rendered", basic_server)
    assert violations(page, console) == []
    page.context.close()


def test_rich_results_on_a_chat_tool_card(browser, live_app, user, fake_llm, basic_server):
    refresh_tools(basic_server)
    conversation = chat_with(user, fake_llm, [basic_server])
    fake_llm.script([{"tool_calls": [{"name": "basic__rich", "arguments": {}, "id": "r1"}]}, {"text": "Done."}])
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    console = watch_csp(page)
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.fill("#composer-text", "show everything")
    page.press("#composer-text", "Enter")
    page.wait_for_selector(".tool-card .status.succeeded", timeout=30000)
    assert page.locator(".tool-card .full-rendered").is_hidden()  # folded until opened
    page.click(".tool-card .toggle button:has-text('Full result')")
    assert_rendered(page, ".tool-card .full-rendered", basic_server)
    page.click(".tool-card .toggle button:has-text('Full result')")
    assert page.locator(".tool-card .full-rendered").is_hidden()
    assert violations(page, console) == []
    page.context.close()
