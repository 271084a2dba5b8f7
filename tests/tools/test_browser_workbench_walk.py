"""Headless Chromium: what a browser walk found wrong with the App workbench and the tool page's
view (issue 28.6, 28.7, 28.8), in a 1400 px window as the walk had.

The console keeps one line a row inside its card after a view's ui/message; the default desktop
device fits the window; fullscreen keeps the dark theme and is told the device's size once; a
view that ignores the dark theme fails a contrast check; on the tool page the view comes before
the JSON and what it sends is shown."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.helpers import login_page, refresh_tools, run_call, wait_for
from tools.models import Server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

WINDOW = {"width": 1400, "height": 900}


def view_of(page, slot: str = "#wb-view"):
    return page.frame_locator(f"{slot} iframe").frame_locator("iframe")


def check(page, name: str):
    return page.locator(f"#checks [data-check={name}]")


def click_in_scaled_view(page, view, selector: str) -> None:
    """A real mouse click on `selector` in a view the workbench scaled down to fit the window.

    Playwright's own click misses there: it adds a cross-origin frame's offset without the
    ancestors' scale. A person's click lands (the browser maps it through the transform): so
    the point is worked out here, from the frame's scaled box and the element's own box, once
    two looks 100 ms apart agree (a layout change in between would send the click elsewhere)."""
    target = view.locator(selector)
    target.evaluate("el => el.scrollIntoView({block: 'center'})")
    frame = page.locator("#wb-view iframe")
    frame.scroll_into_view_if_needed()
    point = None
    for _ in range(50):  # still settling: the view's size reports move its scroll; a page scrollbar rescales the device
        outer = frame.evaluate("f => { const r = f.getBoundingClientRect(); return {x: r.left, y: r.top, scale: r.width / f.offsetWidth}; }")
        inner = target.evaluate("el => { const r = el.getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; }")
        now = (outer["x"] + inner["x"] * outer["scale"], outer["y"] + inner["y"] * outer["scale"])
        if now == point:
            break
        point = now
        page.wait_for_timeout(100)
    else:
        raise AssertionError(f"{selector} in the view kept moving: last at {point}")
    assert outer["scale"] < 1  # the case this is for
    page.mouse.click(*point)


def open_page(browser, live_app):
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.set_viewport_size(WINDOW)
    return page


CONSOLE_GEOMETRY = """() => {
  const card = document.querySelector('.wb-console');
  const table = document.getElementById('console');
  const right = card.getBoundingClientRect().right;
  const rows = [...table.querySelectorAll('tbody tr.console-row')].map((r) => {
    const payload = r.querySelector('.payload');
    const box = r.getBoundingClientRect();
    return {method: r.dataset.method, note: r.classList.contains('note'), height: box.height, right: box.right,
            text: r.textContent, payloadWidth: payload ? payload.getBoundingClientRect().width : null,
            payloadText: payload ? payload.textContent : null};
  });
  return {card: card.clientWidth, cardScroll: card.scrollWidth, cardRight: right, table: table.getBoundingClientRect().width, rows};
}"""


def test_console_keeps_one_line_rows_inside_its_card_after_a_ui_message(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    call = run_call(app_server, "show_marker", {"label": "console " * 30}, user=user)
    page = open_page(browser, live_app)
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/")
    view = view_of(page)
    view.locator("#secret", has_text="STRUCTURED-MARKER-console").wait_for(timeout=30000)
    click_in_scaled_view(page, view, "#message")
    try:
        view.locator("#message-result", has_text=re.compile(r"^ok$")).wait_for(timeout=10000)  # not "ERROR: …ok…"
    except PlaywrightTimeout:  # say what the view and the console showed (seen once in CI, not reproduced)
        seen = {"message-result": view.locator("#message-result").text_content(),
                "status": view.locator("#status").text_content(),
                "console": page.locator("#console tbody").inner_text()[-2000:]}
        raise AssertionError(f"no 'ok' from ui/message: {seen}") from None
    console = page.locator("#console tbody")
    note = console.locator("tr.note", has_text="ui/message")
    note.wait_for(timeout=10000)
    console.locator("tr.out[data-method='ui/notifications/tool-result']").wait_for()
    shape = page.evaluate(CONSOLE_GEOMETRY)
    page.locator(".wb-console").screenshot(path=str(screenshots / "walk-console.png"))
    assert shape["cardScroll"] <= shape["card"], shape
    assert shape["table"] <= shape["card"], shape
    for row in shape["rows"]:
        assert row["right"] <= shape["cardRight"] + 0.5, row
        if row["note"]:
            continue  # a note wraps inside the card
        assert row["height"] <= 32, row  # one line
        if row["payloadText"]:
            assert row["payloadWidth"] >= 200, row  # the payload keeps room to be read
    # The long payload is cut to one line and expands on a click.
    result_row = console.locator("tr.out[data-method='ui/notifications/tool-result']")
    assert result_row.locator(".payload").evaluate("td => td.scrollWidth > td.clientWidth")
    detail_pre = page.locator("#console tr.console-detail pre", has_text="META-MARKER-console")
    for _ in range(3):  # a click that lands while the table is rebuilt for a new message is tried again
        result_row.click()
        try:
            detail_pre.wait_for(timeout=10000)
            break
        except PlaywrightTimeout:
            continue
    detail_pre.wait_for(timeout=1000)
    detail = page.evaluate("() => document.querySelector('#console tr.console-detail').getBoundingClientRect().right")
    assert detail <= shape["cardRight"] + 0.5
    assert page.evaluate("() => document.documentElement.scrollWidth") <= WINDOW["width"]
    # The note says what the view asked to send.
    assert "WIDGET-MESSAGE-MARKER" in note.inner_text()
    page.locator(".wb-console").screenshot(path=str(screenshots / "walk-console-expanded.png"))
    page.context.close()


DEVICE_FIT = """() => {
  const stage = document.querySelector('.wb-stage').getBoundingClientRect();
  const device = document.getElementById('wb-device').getBoundingClientRect();
  const s = document.querySelector('.wb-stage');
  return {stageLeft: stage.left, stageRight: stage.right, deviceLeft: device.left, deviceRight: device.right,
          deviceWidth: device.width, deviceHeight: device.height, stageScroll: s.scrollWidth, stageWidth: s.clientWidth,
          page: document.documentElement.scrollWidth};
}"""


def test_desktop_device_fits_the_window_and_the_view_keeps_its_size(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    call = run_call(app_server, "show_marker", {"label": "fit"}, user=user)
    page = open_page(browser, live_app)
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/")
    view = view_of(page)
    view.locator("#secret", has_text="STRUCTURED-MARKER-fit").wait_for(timeout=30000)
    fit = page.evaluate(DEVICE_FIT)
    page.screenshot(path=str(screenshots / "walk-device-fit.png"))
    # The whole 1280x800 screen (and its frame) is in view, scaled down; nothing scrolls sideways.
    assert fit["deviceRight"] <= fit["stageRight"] + 0.5 and fit["deviceLeft"] >= fit["stageLeft"] - 0.5, fit
    assert fit["stageScroll"] <= fit["stageWidth"], fit
    assert fit["page"] <= WINDOW["width"], fit
    assert abs(fit["deviceHeight"] / fit["deviceWidth"] - 820 / 1300) < 0.01, fit  # scaled, not squeezed
    assert "scaled to" in page.locator("#wb-dimensions").inner_text()
    # The view still lays out at the device's size.
    context = json.loads(view.locator("#host-context").inner_text())
    assert context["containerDimensions"]["width"] == 1280
    assert view.locator("html").evaluate("el => el.clientWidth") == 1278  # 1280 less the host's 1 px border
    # Fit off: the device at its real size, scrolled inside the stage; the address remembers it.
    page.uncheck("#wb-fit")
    wait_for(lambda: page.evaluate(DEVICE_FIT)["deviceWidth"] == 1300, timeout=5, message="the device at full size")
    assert "fit=0" in page.url
    page.context.close()


def host_context_rows(page) -> list[dict]:
    """The host-context-changed notifications the console shows, as sent."""
    texts = page.locator("#console tbody tr.out[data-method='ui/notifications/host-context-changed'] .payload").all_inner_texts()
    return [json.loads(t) for t in texts]


def test_fullscreen_keeps_the_dark_theme_and_is_told_the_device_size_once(browser, live_app, user, vanilla_app_http, screenshots):
    server = Server.objects.create(name="vanilla", transport="streamable_http", url=vanilla_app_http.url, owner=user)
    refresh_tools(server)
    call = run_call(server, "get-time", {}, user=user)
    page = open_page(browser, live_app)
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/?device=phone&theme=dark")
    check(page, "init").locator(".check-pass").wait_for(timeout=30000)
    before = len(host_context_rows(page))
    page.select_option("select[name=mode]", "fullscreen")
    page.locator("#console tbody tr.out[data-method='ui/notifications/host-context-changed'] .payload",
                 has_text='"displayMode":"fullscreen"').first.wait_for(timeout=10000)
    page.wait_for_timeout(1000)  # a second notification, if any, has come by now
    sent = [row for row in host_context_rows(page)[before:] if "containerDimensions" in row]
    assert [row["containerDimensions"] for row in sent] == [{"width": 390, "height": 844}], sent
    # The fullscreen frame keeps the device's dark background, not the page's light Canvas.
    background = page.locator("#wb-view .mcp-widget").evaluate("el => getComputedStyle(el).backgroundColor")
    assert background == page.locator("#wb-device").evaluate("el => getComputedStyle(el).backgroundColor"), background
    assert background != "rgb(255, 255, 255)"
    page.locator("#wb-device").screenshot(path=str(screenshots / "walk-fullscreen-dark.png"))
    page.context.close()


def test_contrast_check_flags_a_view_that_ignores_the_dark_theme(browser, live_app, user, app_server, vanilla_app_http, screenshots):
    refresh_tools(app_server)
    call = run_call(app_server, "show_marker", {"label": "contrast"}, user=user)
    page = open_page(browser, live_app)
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/?theme=dark")
    view_of(page).locator("#secret", has_text="STRUCTURED-MARKER-contrast").wait_for(timeout=30000)
    # The marker view keeps black text whatever the theme: unreadable on the dark device.
    check(page, "contrast").locator(".check-fail").wait_for(timeout=10000)
    assert "Marker app" in check(page, "contrast").inner_text()
    page.screenshot(path=str(screenshots / "walk-contrast-fail.png"))
    page.select_option("select[name=theme]", "light")
    check(page, "contrast").locator(".check-pass").wait_for(timeout=10000)

    # The official example follows the theme: readable in both.
    server = Server.objects.create(name="vanilla", transport="streamable_http", url=vanilla_app_http.url, owner=user)
    refresh_tools(server)
    vanilla = run_call(server, "get-time", {}, user=user)
    page.goto(f"{live_app.url}/tool-calls/{vanilla.pk}/workbench/?theme=dark&device=phone")
    check(page, "contrast").locator(".check-pass").wait_for(timeout=30000)
    page.locator("#wb-device").screenshot(path=str(screenshots / "walk-contrast-vanilla-dark.png"))
    page.context.close()


def test_tool_page_shows_the_view_first_and_what_it_sent(browser, live_app, user, app_server, vanilla_app_http, screenshots):
    server = Server.objects.create(name="vanilla", transport="streamable_http", url=vanilla_app_http.url, owner=user)
    refresh_tools(server)
    page = open_page(browser, live_app)
    page.goto(f"{live_app.url}/servers/{server.pk}/tools/get-time/")
    page.click("#run-tool")
    view = view_of(page, "#run-view")
    view.locator("#server-time").wait_for(timeout=30000)
    wait_for(lambda: view.locator("#server-time").inner_text() != "Loading...", timeout=20, message="the time in the view")
    panel = page.locator("#result-panel").bounding_box()
    shown = page.locator("#run-view-panel").bounding_box()
    full = page.locator("#full-result").bounding_box()
    # The view comes before the JSON, right under the result's heading.
    assert shown["y"] < full["y"], (shown, full)
    assert shown["y"] - panel["y"] < 160, (shown, panel)
    # What the view sends is shown beside it.
    view.locator("#send-message-btn").click()
    page.locator("#run-view-activity li", has_text="This is message text.").wait_for(timeout=10000)
    assert "ui/message" in page.locator("#run-view-activity li", has_text="This is message text.").inner_text()
    view.locator("#send-log-btn").click()
    page.locator("#run-view-activity li", has_text="This is log text.").wait_for(timeout=10000)
    page.locator("#run-view-panel").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "walk-tool-page-view.png"))

    # A large result: the view is still right under the heading, the JSON after it.
    refresh_tools(app_server)
    page.goto(f"{live_app.url}/servers/{app_server.pk}/tools/big_view/")
    page.click("[data-mode=json]")
    page.fill("#raw-args", json.dumps({"size_mb": 0.1}))
    page.click("#run-tool")
    view_of(page, "#run-view").locator("#data-length", has_text=str(int(0.1 * 1024 * 1024))).wait_for(timeout=30000)
    panel = page.locator("#result-panel").bounding_box()
    shown = page.locator("#run-view-panel").bounding_box()
    assert shown["y"] - panel["y"] < 160 and shown["y"] < page.locator("#full-result").bounding_box()["y"]
    page.context.close()
