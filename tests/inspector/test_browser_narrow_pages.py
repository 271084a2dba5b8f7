"""Headless Chromium at 420 px (issue 28.9): the server overview and a re-run page fit a narrow
screen, with nothing wider than the window and no box drawn over another."""

from __future__ import annotations

import pytest

from tests.chat.test_browser_replay import recorded
from tests.chat.test_replay import VOLATILE, drift, drift_http, drift_server  # noqa: F401  (fixtures)
from tests.helpers import login_page, refresh_tools

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

NARROW = {"width": 420, "height": 860}

# What sticks out: the page's width, and every element of `selector` whose right edge passes the
# window's, or whose box overlaps a sibling's of the same selector inside the same parent.
FIT = """(selector) => {
  const width = window.innerWidth;
  const boxes = [...document.querySelectorAll(selector)];
  const outside = boxes.map((el) => [el, el.getBoundingClientRect()])
    .filter(([, r]) => r.right > width + 0.5 || r.left < -0.5)
    .map(([el, r]) => `${el.tagName.toLowerCase()}.${el.className} ${Math.round(r.left)}..${Math.round(r.right)}`);
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    if (boxes[i].parentElement !== boxes[j].parentElement) continue;
    const a = boxes[i].getBoundingClientRect(), b = boxes[j].getBoundingClientRect();
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) overlaps.push([i, j]);
  }
  return {scrollWidth: document.documentElement.scrollWidth, width, outside, overlaps};
}"""


def test_server_overview_fits_420_px(browser, live_app, user, app_server, screenshots):
    refresh_tools(app_server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.set_viewport_size(NARROW)
    page.goto(f"{live_app.url}/servers/{app_server.pk}/")
    page.wait_for_selector("#tools")
    page.screenshot(path=str(screenshots / "narrow-server-overview.png"), full_page=True)
    fit = page.evaluate(FIT, ".card, .card table, .card pre, .card dl, .tabs, .row")
    assert fit["scrollWidth"] <= NARROW["width"], fit
    assert not fit["outside"], fit
    assert not fit["overlaps"], fit
    # One column: the Capabilities card is under the Server card, not beside it.
    server, capabilities = (page.locator("#server-live .cols > .card").nth(i).bounding_box() for i in range(2))
    assert capabilities["y"] >= server["y"] + server["height"], (server, capabilities)
    page.context.close()


def test_rerun_page_fits_420_px(browser, live_app, user, fake_llm, drift, drift_server, screenshots):
    conversation = recorded(user, fake_llm, drift_server)
    drift.set_price(13)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/chat/{conversation.pk}/replays/")
    page.fill("#ignore-paths", "\n".join(VOLATILE))
    page.click("#recorded-form button.primary")
    page.wait_for_selector("#run-verdict.different", timeout=40000)
    page.set_viewport_size(NARROW)
    page.reload()
    page.wait_for_selector("#run-verdict.different")
    page.screenshot(path=str(screenshots / "narrow-rerun.png"), full_page=True)
    fit = page.evaluate(FIT, ".card, .figures, .diff, .diff-table")
    assert fit["scrollWidth"] <= NARROW["width"], fit
    assert not fit["outside"], fit
    assert not fit["overlaps"], fit
    # The two diffs of a call are stacked, each table inside its own box.
    item = page.locator(".replay-item").first
    full, projection = item.locator("[data-diff=full]").bounding_box(), item.locator("[data-diff=projection]").bounding_box()
    assert projection["y"] >= full["y"] + full["height"], (full, projection)
    table = item.locator("[data-diff=full] .diff-table").bounding_box()
    assert table["x"] + table["width"] <= full["x"] + full["width"] + 0.5, (table, full)
    page.context.close()
