"""Headless Chromium: the App workbench and the view on the tool page (issue 15).

A stored call's view renders with its full result, without a model; host conditions switch
live (the view receives host-context-changed) and live in the URL; the console shows every
message with timing; the checks name what an App author must fix. Two App servers of different
make: this project's hand-written test App (Python `mcp` server API) and the official
`server-basic-vanillajs` example (Node, ext-apps SDK)."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import login_page, refresh_tools, run_call, wait_for, wait_for_js
from tools.models import Server, ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def view_of(page):
    """The view's document inside the workbench (inner iframe of the sandbox proxy's iframe)."""
    return page.frame_locator("#wb-view iframe").frame_locator("iframe")


def check(page, name: str):
    return page.locator(f"#checks [data-check={name}]")


def host_context_seen(view) -> dict:
    """What the marker view last received in ui/notifications/host-context-changed."""
    text = view.locator("#host-context").inner_text()
    return json.loads(text) if text else {}


def test_workbench_renders_a_stored_call_and_switches_conditions_live(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    call = run_call(app_server, "show_marker", {"label": "wb"}, user=user)
    assert call.status == "succeeded"
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/?theme=dark&device=phone")
    view = view_of(page)
    # The whole stored result reached the view (structuredContent is never sent to the model).
    view.locator("#secret", has_text="STRUCTURED-MARKER-wb").wait_for(timeout=30000)
    assert json.loads(view.locator("#tool-input").inner_text()) == {"label": "wb"}
    for name in ("resource", "mime", "init", "visibility"):
        check(page, name).locator(".check-pass").wait_for(timeout=10000)
    assert "ui://app/marker.html" in check(page, "resource").inner_text()
    assert check(page, "schema").locator(".badge").inner_text() in ("pass", "na")
    # The URL's conditions were applied at start: a phone, dark, with its safe-area insets.
    assert page.locator("#wb-device").evaluate("el => [el.style.width, el.dataset.theme]") == ["390px", "dark"]
    assert page.locator("select[name=device]").input_value() == "phone"
    assert page.locator("input[name=insets]").is_checked()
    # The view's frame fills the simulated screen's width, less the host's 1 px border (the
    # host's frame styles are there; without them it would be an iframe's default 300 px).
    assert page.locator("#wb-view iframe").evaluate("f => f.getBoundingClientRect().width") == 388
    assert page.locator(".mcp-widget__exit").is_hidden()

    # Console: the view's ui/initialize, answered (with the time it took), then the result.
    console = page.locator("#console tbody")
    init_answer = console.locator("tr.response[data-method='ui/initialize']")
    init_answer.wait_for(timeout=10000)
    assert re.fullmatch(r"\d+ ms", init_answer.locator("td").nth(5).inner_text())
    assert console.locator("tr.request.in[data-method='ui/initialize']").count() == 1
    console.locator("tr.out[data-method='ui/notifications/tool-result']").wait_for(timeout=10000)
    assert console.locator("tr[data-method='ui/notifications/sandbox-resource-ready']").count() == 0  # hidden by default
    page.check("#console-sandbox")
    assert console.locator("tr[data-method='ui/notifications/sandbox-resource-ready'] .payload", has_text="of HTML").count() == 1

    # Switch the theme: the view is told at once, and the address carries it for a teammate.
    page.select_option("select[name=theme]", "light")
    wait_for(lambda: host_context_seen(view).get("theme") == "light", timeout=10, message="host-context-changed theme")
    assert "theme=light" in page.url
    # The view is sent what changed: from a phone to a desktop, the size and the input capabilities.
    page.select_option("select[name=device]", "desktop")
    wait_for(lambda: (host_context_seen(view).get("containerDimensions") or {}).get("width") == 1280, timeout=10,
             message="the desktop's width")
    assert host_context_seen(view)["deviceCapabilities"] == {"touch": False, "hover": True}
    assert host_context_seen(view)["safeAreaInsets"] == {"top": 0, "right": 0, "bottom": 0, "left": 0}
    page.select_option("select[name=device]", "tablet")
    wait_for(lambda: (host_context_seen(view).get("containerDimensions") or {}).get("width") == 820, timeout=10,
             message="the tablet's width")
    assert "device=tablet" in page.url and "w=820" in page.url
    page.fill("input[name=locale]", "fr-FR"); page.locator("input[name=locale]").dispatch_event("change")
    wait_for(lambda: host_context_seen(view).get("locale") == "fr-FR", timeout=10, message="the locale")
    page.fill("input[name=tz]", "Not/AZone"); page.locator("input[name=tz]").dispatch_event("change")
    page.locator("#wb-error", has_text="not an IANA time zone").wait_for()
    assert page.locator("input[name=tz]").input_value() != "Not/AZone"
    console.locator("tr.out[data-method='ui/notifications/host-context-changed']").first.wait_for()

    # The filter keeps matching rows only.
    page.fill("#console-filter", "tool-result")
    wait_for(lambda: console.locator("tr.console-row").count() >= 1
             and all("tool-result" in m for m in console.locator("tr.console-row").evaluate_all("rs => rs.map(r => r.dataset.method)")),
             timeout=5, message="the console filter")
    page.fill("#console-filter", "")

    # A call the view makes goes through the pipeline and is stored, origin "widget".
    view.locator("#call").click()
    view.locator("#call-result", has_text="1").wait_for(timeout=30000)
    assert ToolCall.objects.filter(origin="widget", tool_name="app_only_increment", status="succeeded").exists()

    # The view's own tool, listed from its tools/list and called through the bridge.
    page.locator("#view-tools summary", has_text="marker_echo").click()
    page.fill("#view-tools #arg-text", "from the bench")
    page.click("#view-tools button:has-text('Call marker_echo')")
    page.locator("#view-tools pre", has_text="VIEW-TOOL-from the bench").wait_for(timeout=10000)
    assert view.locator("#view-calls").inner_text() == "1 from the bench"

    # ui/download-file: the embedded resource is saved from its own bytes.
    with page.expect_download() as download:
        view.locator("#download").click()
    assert download.value.suggested_filename == "report.txt"
    assert open(download.value.path()).read() == "DOWNLOAD-MARKER"
    view.locator("#download-result", has_text=re.compile(r"^ok$")).wait_for()

    # Opening the same address gives the same setup.
    other = page.context.new_page()
    other.goto(page.url)
    assert other.locator("select[name=device]").input_value() == "tablet"
    assert other.locator("select[name=theme]").input_value() == "light"
    assert other.locator("input[name=locale]").input_value() == "fr-FR"
    page.screenshot(path=str(screenshots / "workbench-marker.png"), full_page=True)
    page.context.close()


def test_workbench_reports_a_csp_violation_and_an_oversized_view(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    call = run_call(app_server, "csp_probe", {}, user=user)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/?device=phone")
    check(page, "csp").locator(".check-fail").wait_for(timeout=30000)
    assert "blocked.invalid" in check(page, "csp").inner_text()
    check(page, "size").locator(".check-warn").wait_for(timeout=10000)
    assert "width 5000 > 390 px" in check(page, "size").inner_text()
    # The report travels as a log message from the view: it is in the console too.
    page.locator("#console tbody tr.level-warning[data-method='notifications/message']").first.wait_for()
    page.screenshot(path=str(screenshots / "workbench-csp-probe.png"), full_page=True)
    page.context.close()


def test_workbench_drives_the_official_vanillajs_example(browser, live_app, user, vanilla_app_http, screenshots):
    server = Server.objects.create(name="vanilla", transport="streamable_http", url=vanilla_app_http.url, owner=user)
    refresh_tools(server)
    call = run_call(server, "get-time", {}, user=user)
    shown_time = call.full_result.raw["structuredContent"]["time"]
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/")
    view = view_of(page)
    view.locator("#server-time", has_text=shown_time).wait_for(timeout=30000)
    for name in ("resource", "mime", "init"):
        check(page, name).locator(".check-pass").wait_for(timeout=10000)
    # The ext-apps SDK view reports its size; our container holds it.
    check(page, "size").locator(".check-pass").wait_for(timeout=10000)
    # Its bundle probes for eval (blocked, as always in the sandbox): said, but not a failed request.
    assert check(page, "csp").locator(".badge").inner_text() in ("pass", "warn")
    assert "Blocked requests" not in check(page, "csp").inner_text()
    # A dark theme reaches the SDK, which applies it to the document.
    page.select_option("select[name=theme]", "dark")
    wait_for(lambda: view.locator("html").evaluate("el => el.dataset.theme || el.style.colorScheme || getComputedStyle(el).colorScheme") == "dark",
             timeout=10, message="the view's document in the dark theme")
    view.locator("#get-time-btn").click()
    wait_for(lambda: ToolCall.objects.filter(origin="widget", tool_name="get-time", status="succeeded").exists(),
             message="the view's own tools/call")
    page.screenshot(path=str(screenshots / "workbench-vanillajs-dark.png"), full_page=True)
    page.context.close()


def test_running_an_app_tool_on_its_page_shows_its_view(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{app_server.pk}/tools/show_marker/")
    page.click("[data-mode=json]")
    page.fill("#raw-args", json.dumps({"label": "page"}))
    page.click("#run-tool")
    view = page.frame_locator("#run-view iframe").frame_locator("iframe")
    view.locator("#secret", has_text="STRUCTURED-MARKER-page").wait_for(timeout=30000)
    call = ToolCall.objects.get(tool_name="show_marker", arguments={"label": "page"})
    assert page.locator("#open-workbench").get_attribute("href") == f"/tool-calls/{call.pk}/workbench/"
    page.locator("#run-view-panel").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "tool-page-app-view.png"))
    # Running again replaces the view; a tool without a view shows none.
    page.fill("#raw-args", json.dumps({"label": "again"}))
    page.click("#run-tool")
    view.locator("#secret", has_text="STRUCTURED-MARKER-again").wait_for(timeout=30000)
    assert page.locator("#run-view iframe").count() == 1
    page.goto(f"{live_app.url}/servers/{app_server.pk}/tools/big_text/")
    page.click("[data-mode=json]")
    page.fill("#raw-args", json.dumps({"size_mb": 0.001}))
    page.click("#run-tool")
    page.wait_for_selector("#run-status.succeeded", timeout=30000)
    assert page.locator("#run-view-panel").is_hidden()
    page.context.close()


def test_preview_a_ui_resource_with_hand_written_and_stored_data(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    stored = run_call(app_server, "show_marker", {"label": "stored"}, user=user)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{app_server.pk}/resources/")
    page.click(".preview-link[href*='marker.html']")
    page.wait_for_url("**/preview/?uri=ui*")
    view = view_of(page)
    # The hand-written default result reaches the view; no tool was called for it.
    view.locator("#content", has_text="Hello from the workbench").wait_for(timeout=30000)
    assert ToolCall.objects.filter(tool_name="show_marker").count() == 1
    check(page, "resource").locator(".check-pass").wait_for(timeout=10000)
    assert "ui://app/marker.html" in check(page, "resource").inner_text()
    # Bad JSON is said and sends nothing.
    page.fill("#preview-result", "{not json")
    page.click("#preview-send")
    page.locator("#preview-error", has_text="JSON").wait_for()
    # Filled from a stored call, then sent: the view gets that call's input and full result.
    page.select_option("#preview-from", str(stored.pk))
    wait_for_js(page, "document.getElementById('preview-result').value.includes('STRUCTURED-MARKER-stored')")
    page.click("#preview-send")
    # The old view is torn down (its frame removed) before this note and the new one mounted after
    # it: waiting inside the view only then never waits in a frame that is going away. (Once on CI,
    # waiting earlier ended in "Target page, context or browser has been closed"; a 1.5 s delay
    # before the old frame's removal did not reproduce it, so that cause is likely, not proven.)
    page.locator("#console tbody tr.note", has_text="reloaded with new data").wait_for()
    page.locator("#console tbody tr.out[data-method='ui/resource-teardown']").first.wait_for()
    view.locator("#secret", has_text="STRUCTURED-MARKER-stored").wait_for(timeout=30000)
    assert json.loads(view.locator("#tool-input").inner_text()) == {"label": "stored"}
    # The view's own calls work in a preview too, stored without a parent call. (The desktop
    # device is scaled to fit this window; Playwright's click cannot aim inside a scaled
    # cross-origin frame, so the device is shown at its real size first.) The button gets its
    # click as an event, not from the mouse: once on CI a mouse click aimed into this frame in a
    # frame was lost even at real size (no tools/call reached the server).
    page.uncheck("#wb-fit")
    view.locator("#call").dispatch_event("click")
    view.locator("#call-result", has_text="1").wait_for(timeout=30000)
    widget = ToolCall.objects.get(origin="widget", tool_name="app_only_increment")
    assert widget.view_call_id is None and widget.requested_by == user
    assert "the model can call it" in check(page, "visibility").inner_text()  # show_marker, not the app-only tool
    page.screenshot(path=str(screenshots / "workbench-preview.png"), full_page=True)
    page.locator("#wb-device").screenshot(path=str(screenshots / "workbench-preview-device.png"))
    page.context.close()


def test_display_modes_follow_what_the_view_declares(browser, live_app, user, app_server, vanilla_app_http):
    refresh_tools(app_server)
    marker = run_call(app_server, "show_marker", {"label": "m"}, user=user)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/tool-calls/{marker.pk}/workbench/")
    check(page, "init").locator(".check-pass").wait_for(timeout=30000)
    # The marker view declares only inline: the host offers nothing else.
    assert page.locator("select[name=mode] option[value=fullscreen]").is_disabled()
    assert page.locator("select[name=mode] option[value=pip]").is_disabled()
    # The official example declares none: fullscreen fills the simulated screen, and the view is told.
    server = Server.objects.create(name="vanilla", transport="streamable_http", url=vanilla_app_http.url, owner=user)
    refresh_tools(server)
    call = run_call(server, "get-time", {}, user=user)
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/?device=phone")
    check(page, "init").locator(".check-pass").wait_for(timeout=30000)
    page.select_option("select[name=mode]", "fullscreen")
    page.locator("#console tbody tr.out[data-method='ui/notifications/host-context-changed'] .payload",
                 has_text='"displayMode":"fullscreen"').first.wait_for(timeout=10000)
    box = page.locator("#wb-view .mcp-widget").bounding_box()
    screen = page.locator("#wb-device").evaluate("d => [d.clientWidth, d.clientHeight]")
    assert (round(box["width"]), round(box["height"])) == tuple(screen) == (390, 844)
    assert "mode=fullscreen" in page.url
    page.context.close()
