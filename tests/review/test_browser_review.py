"""Headless Chromium over the review pages (issue 29), one bounded walk: approve a version on the
review page, see the drift the next refresh brings (server page and review page), compare the two
versions, start a load test from the form and watch its run page fill in live (static/js/loadtest-run.js
polling the JSON) until it ends. Real daphne, worker and stdio surface server."""

from __future__ import annotations

import pytest

from review.models import LoadRun
from tests.helpers import login_page, refresh_tools, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("celery_worker")
def test_review_pages_approve_drift_diff_and_a_live_load_test(browser, live_app, surface_server, surface_state, screenshots):
    refresh_tools(surface_server)
    page = login_page(browser, live_app, "stella", "stella-pass-123")
    page.goto(f"{live_app.url}/servers/{surface_server.pk}/review/")
    assert "not reviewed" in page.inner_text("#approved-note")
    page.click("text=Approve v1")
    page.wait_for_selector(".approved-badge")

    surface_state.set("v2")
    refresh_tools(surface_server)
    page.goto(f"{live_app.url}/servers/{surface_server.pk}/")
    assert "Unapproved drift" in page.inner_text("#review-summary")
    page.click("#review-tab")
    assert page.locator("tr.surface-version").count() == 2
    assert "archive, export, search" in page.inner_text("#drift-banner")
    page.click("#compare-button")
    page.wait_for_selector("#surface-diff")
    assert "8 breaking" in page.inner_text("#diff-counts")
    assert page.locator('tr.change.breaking[data-rule="input-enum-values-removed"]').count() == 1
    assert page.locator("tr.change .text-diff ins").first.inner_text().strip() != ""
    page.screenshot(path=str(screenshots / "review-diff.png"), full_page=True)

    page.goto(f"{live_app.url}/servers/{surface_server.pk}/review/")
    page.select_option("#loadtest-tool", "slow")
    page.fill("#loadtest-arguments", '{"ms": 30}')
    page.fill("#loadtest-calls", "40")
    page.fill("#loadtest-concurrency", "4")
    page.click("#loadtest-start")
    page.wait_for_selector("#loadtest-run")
    wait_for_js(page, "document.getElementById('loadtest-run').dataset.status === 'succeeded'", timeout=90)
    assert page.inner_text("#run-progress") == "40/40"
    wire = page.inner_text('[data-k="wire_ms"]')
    assert "n=" in wire and wire != "—"
    assert page.inner_text('[data-k="errors_by_kind"]') == "none"
    assert LoadRun.objects.get().status == LoadRun.Status.SUCCEEDED
    page.screenshot(path=str(screenshots / "review-loadtest.png"), full_page=True)
