"""Every tool a server lists is listed (issue 28.4), with the published reference server
`@modelcontextprotocol/server-everything` (tests/npm_servers) over Streamable HTTP, a real
worker and headless Chromium.

The walk saw 17 tools where the official inspector shows 19. The inspector hides none: the
server lists its two `*-async` tools only to a client that declares `tasks` for the server's own
requests (elicitation and sampling run as client-side tasks), which this one does not. The server
page now says so beside the list, so a missing tool has an explanation."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import NPM_SERVERS
from tests.helpers import ARTIFACTS
from tests.helpers import login_page, refresh_tools, stop_process, wait_for
from tools.models import RpcFrame, Server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture(scope="module")
def everything_http():
    from inspector.launch import free_port, wait_for_port

    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    entry = NPM_SERVERS / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    if not entry.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NPM_SERVERS, check=True, capture_output=True)
    port = free_port()
    log = open(ARTIFACTS / "everything-server.log", "wb")
    proc = subprocess.Popen([node, str(entry), "streamableHttp"], cwd=NPM_SERVERS, env={**os.environ, "PORT": str(port)},
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for_port("127.0.0.1", port, 30, proc)
    proc.url = f"http://127.0.0.1:{port}/mcp"
    yield proc
    stop_process(proc)
    log.close()


def test_server_page_lists_every_tool_the_server_sent_and_says_why_some_are_not_sent(browser, live_app, user,
                                                                                      everything_http, screenshots):
    server = Server.objects.create(name="everything", transport="streamable_http", url=everything_http.url, owner=user)
    refresh_tools(server)
    # What the server itself answered to tools/list, from the JSON-RPC log.
    def answers():
        return [f.payload for f in RpcFrame.objects.filter(server=server, direction="in", kind="response").order_by("at")
                if isinstance((f.payload.get("result") or {}).get("tools"), list)]

    listed = sorted(t["name"] for t in wait_for(answers, timeout=10, message="the tools/list answer in the log")[-1]["result"]["tools"])
    assert "simulate-research-query" in listed and "trigger-elicitation-request-async" not in listed

    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{server.pk}/")
    rows = page.locator("#tools tbody tr")
    shown = sorted(rows.locator("td:first-child code").all_inner_texts())
    assert shown == listed  # all of them, none hidden
    assert page.locator("#tools h2").inner_text() == f"Tools ({len(listed)})"
    # The tool that needs a task says so beside it.
    research = page.locator("#tools tr", has=page.locator("code", has_text="simulate-research-query"))
    assert "task required" in research.inner_text()
    # Why a server may list fewer tools here than elsewhere: what this client declares, and not.
    note = page.locator("#tools .tools-listing-note").inner_text()
    assert f"{len(listed)} tools" in note
    assert "tasks.requests.elicitation.create" in note and "tasks.requests.sampling.createMessage" in note
    page.locator("#tools").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "server-tools-everything.png"), full_page=True)
    page.context.close()
