"""Headless Chromium on the eval pages: a run's page follows the run live until its verdict, shows
the pass rate per case and model and each failed check; the compare page shows what flipped and
the projection the model saw when it went wrong; side by side sends one prompt to two models."""

from __future__ import annotations

import pytest

from evals import runs
from evals.models import Case, Run, Suite
from tests.helpers import login_page, refresh_tools, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

MODEL = "openai/test-model"


def test_run_page_live_then_compare_and_side_by_side(browser, live_app, user, fake_llm, basic_server, screenshots):
    refresh_tools(basic_server)
    suite = Suite.objects.create(owner=user, name="Browser suite")
    suite.servers.set([basic_server])
    Case.objects.create(suite=suite, position=1, name="sum", prompts=["2+3?"], expectations={
        "must_call": [{"server": "basic", "tool": "add", "arguments": [{"path": "b", "op": "equal", "value": 3}]}]})

    # Run 1 passes.
    fake_llm.script([{"tool_calls": [{"name": "basic__add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}])
    first = runs.start_run(suite, user, [MODEL], api_base=fake_llm.url)
    wait_for(lambda: Run.objects.get(pk=first.pk).status == "completed", timeout=60, message="run 1")

    # Run 2 fails, slowly: its page is open while it runs and fills in by itself.
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    fake_llm.script([{"delay": 3.0, "tool_calls": [{"name": "basic__add", "arguments": {"a": 2, "b": 4}}]}, {"text": "6"}])
    second = runs.start_run(suite, user, [MODEL], api_base=fake_llm.url)
    page.goto(f"{live_app.url}/evals/runs/{second.pk}/")
    assert page.inner_text("#run-status") == "running"
    assert page.locator("#cancel-form button").is_visible()
    page.wait_for_selector("#run-status.completed", timeout=60_000)  # the page reloaded itself as the run went on
    assert "below threshold" in page.inner_text("#run-verdict.fail")
    assert "0/1" in page.inner_text("#matrix td.cell.below")
    assert "b is 4, not 3" in page.inner_text("#attempts")
    page.screenshot(path=str(screenshots / "evals-run.png"), full_page=True)

    # Compare run 1 -> run 2 from the run page's form: the case broke, and what the model saw.
    page.click("#compare-form button")
    page.wait_for_selector("#compare")
    assert "1 broke" in page.inner_text("#compare-summary")
    assert page.locator('#compare tr[data-flip="broke"]').count() == 1
    page.click(".wrong details summary")
    assert '"sum": 6' in page.inner_text(".wrong pre.projection")  # the projection of add(2, 4)
    page.screenshot(path=str(screenshots / "evals-compare.png"), full_page=True)

    # Side by side: one prompt, two models, each its own conversation, filled in live.
    fake_llm.script([{"text": "Answer from a model.", "times": None}])
    page.goto(f"{live_app.url}/evals/side-by-side/")
    page.fill("textarea[name=prompt]", "Hello both")
    page.fill("textarea[name=models]", f"{MODEL} {fake_llm.url}\nopenai/other-model {fake_llm.url}")
    page.click("#side-by-side-form button.primary")
    page.wait_for_selector("#columns .column:nth-child(2)")
    for n in (1, 2):
        page.wait_for_selector(f"#columns .column:nth-child({n}) .message.assistant >> text=Answer from a model.")
    assert page.locator("#columns .column .message.user").count() == 2
    assert errors == []
