"""Headless Chromium: a tool that requires an MCP task, run from its tool page, shows the task's
status as the server reports it, then the result; one that allows a task runs as one when
*As a task* is ticked. Real parts: tests/mcp_servers/tasks.py over Streamable HTTP, the suite's
worker, daphne."""

from __future__ import annotations

import pytest

from tests.helpers import login_page, refresh_tools
from tools.models import Server, ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture(scope="module")
def tasks_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("tasks.py", "http", "--legacy")
    yield server
    server.stop()


def test_the_tool_page_shows_a_task_working_then_its_result(browser, live_app, user, tasks_http, screenshots):
    server = Server.objects.create(name="tasks", transport="streamable_http", url=tasks_http.url, owner=user)
    refresh_tools(server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{server.pk}/tools/slow_report/")
    assert "task required" in page.locator("h2").inner_text()
    page.locator("#schema-form input[name=seconds]").fill("4")
    page.locator("#run-tool").click()
    line = page.locator("#run-task")
    line.locator(".task-message", has_text="step 2 of 4").wait_for(timeout=20000)
    assert "task working" in line.inner_text()
    page.screenshot(path=str(screenshots / "task-working.png"), full_page=True)
    page.locator("#result-panel").wait_for(state="visible", timeout=20000)
    line.locator(".status", has_text="task completed").wait_for(timeout=10000)
    assert "done after 4 s" in page.locator("#result-panel").inner_text()
    page.screenshot(path=str(screenshots / "task-completed.png"), full_page=True)

    page.goto(f"{live_app.url}/servers/{server.pk}/tools/maybe_task/")
    page.locator("#schema-form input[name=text]").fill("hi")
    page.locator("#run-as-task").check()
    page.locator("#run-tool").click()
    page.locator("#result-panel").wait_for(state="visible", timeout=20000)
    assert "task: hi" in page.locator("#result-panel").inner_text()
    assert ToolCall.objects.filter(tool_name="maybe_task").get().task_mode == "optional"
