"""Browser tests of static/js/widget-host.js + static/sandbox/proxy.js, without Django.

Two local HTTP servers give two origins (host page, sandbox proxy); headless
Chromium loads frontend/test/host.html, which mounts widgets whose views speak
MCP Apps JSON-RPC by hand (or use window.openai through the shim).

Run:  /work/main/.venv/bin/python -m pytest frontend/test -p no:django -q
Screenshots land in frontend/test/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

TEST_DIR = Path(__file__).resolve().parent
# Next to the tests, or in the run's own folder when it has one (CI runs two at once).
SCREENSHOTS = Path(os.environ["TEST_ARTIFACTS"]) / "widget-host" if os.environ.get("TEST_ARTIFACTS") else TEST_DIR / "screenshots"
sys.path.insert(0, str(TEST_DIR))
from serve_two_origins import start_servers  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SECRET = "SC-ONLY-7731"  # present only in structuredContent, never in content


@pytest.fixture(scope="module")
def servers():
    host, sandbox = start_servers()
    yield f"http://127.0.0.1:{host.server_address[1]}", f"http://127.0.0.1:{sandbox.server_address[1]}"
    host.shutdown()
    sandbox.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser, servers):
    host_origin, sandbox_origin = servers
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    pg = context.new_page()
    pg.console_messages_seen = []
    pg.on("console", lambda m: pg.console_messages_seen.append(f"{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: pg.console_messages_seen.append(f"pageerror: {e}"))
    pg.goto(f"{host_origin}/?sandbox={sandbox_origin}")
    pg.wait_for_function("window.__ready === true")
    pg.host_origin = host_origin
    pg.sandbox_origin = sandbox_origin
    yield pg
    context.close()


# --- helpers -----------------------------------------------------------------


def mount(page, widget_id, kind="mcp", **overrides):
    page.evaluate("([id, kind, o]) => mountTest(id, kind, o)", [widget_id, kind, overrides])


def view(page, widget_id):
    """Locator scope for the inner (view) iframe of a widget."""
    return page.frame_locator(f"#{widget_id} iframe.mcp-widget__frame").frame_locator("iframe")


def events(page, type_=None):
    evs = page.evaluate("window.__events")
    return [e for e in evs if type_ is None or e["type"] == type_]


def view_logs(page, widget_id, event):
    """`notifications/message` entries the test view reported under `event`."""
    return [
        e["params"]["data"]["detail"]
        for e in events(page, "onLog")
        if e["widget"] == widget_id and e["params"]["data"].get("event") == event
    ]


def wait_view_log(page, widget_id, event, timeout=10000):
    page.wait_for_function(
        """([id, ev]) => window.__events.some(e => e.type === 'onLog' && e.widget === id
              && e.params.data && e.params.data.event === ev)""",
        arg=[widget_id, event],
        timeout=timeout,
    )
    return view_logs(page, widget_id, event)


def wait_event(page, type_, widget_id, timeout=10000):
    page.wait_for_function(
        "([t, id]) => window.__events.some(e => e.type === t && e.widget === id)",
        arg=[type_, widget_id],
        timeout=timeout,
    )
    return [e for e in events(page, type_) if e.get("widget") == widget_id]


def shot(page, name):
    SCREENSHOTS.mkdir(exist_ok=True)
    # Viewport only: full-page capture resizes the viewport and can catch the
    # out-of-process sandbox frames mid-relayout.
    page.wait_for_timeout(150)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def mount_initialised(page, widget_id="w", **overrides):
    """Mount the hand-written view and queue input + result BEFORE it initialises."""
    mount(page, widget_id, **overrides)
    page.evaluate(
        """([id, secret]) => {
            const w = window.__widgets[id];
            w.sendToolInputPartial({ partial: true });
            w.sendToolInput({ q: 'input-1' });
            w.sendToolResult({
              content: [{ type: 'text', text: 'A result for the model (no secret here).' }],
              structuredContent: { secret },
              _meta: { 'io.example/trace': 'abc' },
              unknownTopLevelField: 'kept',
            });
        }""",
        [widget_id, SECRET],
    )
    wait_event(page, "onInitialized", widget_id)
    return wait_view_log(page, widget_id, "tool-result")[0]


# --- tests -------------------------------------------------------------------


def test_view_initialises_and_renders_structured_content(page):
    result = mount_initialised(page, "w")

    expect(view(page, "w").locator("#value")).to_have_text(SECRET)
    expect(view(page, "w").locator("#status")).to_contain_text("initialized (host mcp-inspector")
    # The full result reached the view: unknown fields and _meta included.
    assert result["secret"] == SECRET
    assert result["unknownField"] == "kept"
    assert result["meta"] == {"io.example/trace": "abc"}
    # Nothing arrived before ui/notifications/initialized; the queued partial was
    # superseded by the complete input; input precedes result.
    assert [s["method"] for s in result["seen"]] == ["ui/notifications/tool-input", "ui/notifications/tool-result"]
    assert not any(s["beforeInitialized"] for s in result["seen"])

    init = view_logs(page, "w", "initialize-result")[0]
    ctx = init["hostContext"]
    assert init["protocolVersion"] == "2026-01-26"
    assert ctx["theme"] == "light" and ctx["locale"] == "en-GB" and ctx["timeZone"] == "Europe/Paris"
    assert ctx["displayMode"] == "inline" and ctx["availableDisplayModes"] == ["inline", "fullscreen", "pip"]
    assert ctx["toolInfo"]["tool"]["name"] == "show_secret"
    assert init["hostCapabilities"]["serverTools"] == {}
    expect(view(page, "w").locator("#input")).to_have_text('{"q":"input-1"}')
    shot(page, "01-initialised-structured-content")


def test_tools_call_reaches_host_and_response_reaches_view(page):
    mount_initialised(page, "w")
    view(page, "w").locator("#call").click()
    calls = wait_event(page, "onCallTool", "w")
    assert calls[0]["name"] == "echo" and calls[0]["args"] == {"text": "hello from view"}
    expect(view(page, "w").locator("#tool-response")).to_have_text('{"echoed":"hello from view"} / echo: hello from view')
    shot(page, "02-tools-call")


def test_update_model_context_reaches_host(page):
    mount_initialised(page, "w")
    view(page, "w").locator("#context").click()
    updates = wait_event(page, "onUpdateModelContext", "w")
    assert updates[0]["params"] == {
        "content": [{"type": "text", "text": "user picked B"}],
        "structuredContent": {"picked": "B"},
    }
    assert wait_view_log(page, "w", "context-ok")[0] == {}


def test_open_link_refuses_javascript_and_opens_https_without_opener(page):
    mount_initialised(page, "w")
    view(page, "w").locator("#badlink").click()
    refused = wait_view_log(page, "w", "open-link-result")[0]
    assert refused["ok"] is False
    assert refused["error"]["code"] == -32602
    assert "javascript:" in refused["error"]["message"]
    assert not events(page, "window.open") and not events(page, "onOpenLink")

    view(page, "w").locator("#goodlink").click()
    page.wait_for_function("window.__events.some(e => e.type === 'window.open')")
    assert events(page, "window.open")[0]["args"] == ["https://example.com/docs?x=1", "_blank", "noopener,noreferrer"]
    assert events(page, "onOpenLink")[0]["url"] == "https://example.com/docs?x=1"
    expect(view(page, "w").locator("#link-results")).to_contain_text("refused -32602")
    shot(page, "03-open-link")


def test_view_cannot_reach_host_cookie_dom_or_forge_messages(page):
    mount_initialised(page, "w")
    probes = view_logs(page, "w", "isolation")[0]
    # Record what the browser said (kept next to the screenshots).
    SCREENSHOTS.mkdir(exist_ok=True)
    (SCREENSHOTS / "isolation-probes.json").write_text(json.dumps(probes, indent=2) + "\n")

    for name in ("top.document.cookie", "top.document.body", "parent.document", "top.location.href"):
        assert probes[name]["ok"] is False, name
        assert probes[name]["error"].startswith("SecurityError"), probes[name]
    # Sandboxed without allow-same-origin: opaque origin, no cookies or storage of its own.
    assert probes["own document.cookie"]["ok"] is False
    assert probes["localStorage"]["ok"] is False
    assert probes["origin"]["value"] == "null"
    assert "HOST-COOKIE-SECRET" not in json.dumps(probes)
    assert "HOST-DOM-SECRET" not in json.dumps(probes)

    # Forged messages were dropped: no direct tools/call reached the host, and the
    # proxy did not replace the view with the HTML the view itself sent.
    page.wait_for_timeout(500)
    assert not [e for e in events(page, "onCallTool") if e["name"] == "forged-direct"]
    expect(view(page, "w").locator("#replaced")).to_have_count(0)
    expect(view(page, "w").locator("#value")).to_have_text(SECRET)
    shot(page, "04-isolation")


def test_csp_blocks_fetch_to_undeclared_domain(page):
    data_url = f"{page.host_origin}/data.json"
    mount(page, "w", toolInput={"dataUrl": data_url})
    violation = wait_view_log(page, "w", "csp-violation")[0]
    assert violation == {"directive": "connect-src", "blockedURI": data_url}
    fetch = wait_view_log(page, "w", "fetch")[0]
    assert fetch["ok"] is False
    assert any("violates the following Content Security Policy directive" in m for m in page.console_messages_seen)
    assert any("connect-src 'none'" in m for m in page.console_messages_seen)
    shot(page, "05-csp-blocked")


def test_csp_allows_declared_connect_domain_and_ignores_bogus_entries(page):
    data_url = f"{page.host_origin}/data.json"
    mount(page, "allowed", toolInput={"dataUrl": data_url}, csp={"connectDomains": [page.host_origin]})
    fetch = wait_view_log(page, "allowed", "fetch")[0]
    assert fetch == {"url": data_url, "ok": True, "data": {"hello": "data from an allowed connect domain"}}

    assert not view_logs(page, "allowed", "csp-violation")
    init = view_logs(page, "allowed", "initialize-result")[0]
    assert init["hostCapabilities"]["sandbox"]["csp"] == {"connectDomains": [page.host_origin]}
    shot(page, "06-csp-declared-domain")


BOGUS_DOMAINS = ["*", "https:", "'unsafe-eval'", "https://a.example; connect-src {origin}", "https://b.example connect-src {origin}"]


def test_widget_host_drops_bogus_csp_entries(page):
    data_url = f"{page.host_origin}/data.json"
    bogus = [d.format(origin=page.host_origin) for d in BOGUS_DOMAINS]
    mount(page, "bogus", toolInput={"dataUrl": data_url}, csp={"connectDomains": bogus})
    assert wait_view_log(page, "bogus", "csp-violation")[0]["directive"] == "connect-src"
    assert wait_view_log(page, "bogus", "fetch")[0]["ok"] is False
    init = view_logs(page, "bogus", "initialize-result")[0]
    assert init["hostCapabilities"]["sandbox"]["csp"] == {"connectDomains": []}


def test_proxy_itself_drops_bogus_csp_entries(page):
    # Bypass widget-host.js: the proxy alone must not turn wildcards, keywords
    # or directive injection into a policy that allows the fetch.
    data_url = f"{page.host_origin}/data.json"
    bogus = [d.format(origin=page.host_origin) for d in BOGUS_DOMAINS]
    page.evaluate("([csp, args]) => rawProxy('raw', { csp }, args)", [{"connectDomains": bogus}, {"dataUrl": data_url}])
    violation = wait_view_log(page, "raw", "csp-violation")[0]
    assert violation == {"directive": "connect-src", "blockedURI": data_url}
    assert wait_view_log(page, "raw", "fetch")[0]["ok"] is False
    assert any("connect-src 'none'" in m and "view CSP" in m for m in page.console_messages_seen)
    assert any("ignoring invalid connectDomains entry" in m for m in page.console_messages_seen)
    # Positive control through the same raw path.
    page.evaluate(
        "([csp, args]) => rawProxy('raw-ok', { csp }, args)",
        [{"connectDomains": [page.host_origin]}, {"dataUrl": data_url}],
    )
    assert wait_view_log(page, "raw-ok", "fetch")[0]["ok"] is True


def test_display_modes_follow_declared_modes(page):
    mount_initialised(page, "w")
    view(page, "w").locator("#fullscreen").click()
    expect(page.locator("#w")).to_have_class(re.compile(r"\bmcp-widget--fullscreen\b"))
    result = [r for r in wait_view_log(page, "w", "display-mode-result")][0]
    assert result["result"] == {"mode": "fullscreen"}
    assert events(page, "onRequestDisplayMode")[0]["mode"] == "fullscreen"
    changed = wait_view_log(page, "w", "host-context-changed")[0]
    assert changed["displayMode"] == "fullscreen"
    assert changed["containerDimensions"] == {"width": 1280, "height": 860}
    shot(page, "07-fullscreen")

    # The view declared only inline + fullscreen: pip is refused (current mode returned).
    view(page, "w").locator("#pip").click()
    page.wait_for_function(
        "() => window.__events.filter(e => e.type === 'onLog' && e.params.data.event === 'display-mode-result').length === 2"
    )
    assert view_logs(page, "w", "display-mode-result")[1] == {"requested": "pip", "result": {"mode": "fullscreen"}}
    expect(page.locator("#w")).not_to_have_class(re.compile(r"\bmcp-widget--pip\b"))

    # The host's own exit button returns to inline and tells the view.
    page.locator("#w .mcp-widget__exit").click()
    expect(page.locator("#w")).not_to_have_class(re.compile(r"\bmcp-widget--fullscreen\b"))
    page.wait_for_function(
        """() => window.__events.some(e => e.type === 'onLog' && e.params.data.event === 'host-context-changed'
              && e.params.data.detail.displayMode === 'inline')"""
    )


def test_size_changed_resizes_outer_iframe(page):
    mount_initialised(page, "w")
    frame = page.locator("#w iframe.mcp-widget__frame")
    page.wait_for_timeout(300)
    before = frame.bounding_box()["height"]
    view(page, "w").locator("#grow").click()
    page.wait_for_function(
        "([h]) => document.querySelector('#w iframe.mcp-widget__frame').getBoundingClientRect().height > h + 250",
        arg=[before],
    )
    sizes = [e["height"] for e in events(page, "onSizeChanged") if e["widget"] == "w"]
    assert max(sizes) > before + 250
    # Capped by containerDimensions.maxHeight (600).
    assert frame.bounding_box()["height"] <= 600
    shot(page, "08-size-changed")


def test_permissions_become_iframe_allow_attributes(page):
    mount_initialised(page, "w", permissions={"clipboardWrite": {}, "geolocation": {}})
    assert page.locator("#w iframe.mcp-widget__frame").get_attribute("allow") == "geolocation; clipboard-write"
    features = view_logs(page, "w", "isolation")[0]["features"]
    assert features == {"camera": False, "microphone": False, "geolocation": True, "clipboard-write": True}


def test_no_permissions_by_default(page):
    mount_initialised(page, "w")
    assert page.locator("#w iframe.mcp-widget__frame").get_attribute("allow") is None
    features = view_logs(page, "w", "isolation")[0]["features"]
    assert not any(features.values())


def test_proxy_ignores_a_host_origin_it_was_not_given(page):
    # The proxy is told to trust another origin: its ready message is dropped by
    # the browser (pinned targetOrigin) and it accepts nothing from us.
    other = page.host_origin.replace("127.0.0.1", "localhost")
    mount(page, "w", sandboxHostParam=other)
    page.wait_for_timeout(2000)
    assert not [e for e in events(page) if e.get("widget") == "w" and e["type"] in ("onInitialized", "onLog")]
    proxy = page.frame_locator("#w iframe.mcp-widget__frame")
    expect(proxy.locator(".proxy-error")).to_contain_text("expected " + other)
    expect(proxy.locator("iframe")).to_have_count(0)
    shot(page, "09-wrong-host-origin")


def test_teardown_asks_the_view_then_removes_the_frame(page):
    mount_initialised(page, "w")
    page.evaluate("window.__widgets.w.teardown('test done')")
    assert wait_view_log(page, "w", "teardown")[0] == {"reason": "test done"}
    expect(page.locator("#w iframe")).to_have_count(0)
    # Sends after teardown are no-ops, not errors.
    page.evaluate("window.__widgets.w.sendToolResult({content: []})")


def test_openai_apps_sdk_widget_through_shim(page):
    mount(
        page,
        "oa",
        kind="openai",
        toolInput={"city": "Paris"},
        widgetState={"clicks": 2},
    )
    frame = view(page, "oa")
    # window.openai existed before the widget's first script ran, with the saved state.
    expect(frame.locator("#at-load")).to_have_text('{"hasOpenai":true,"widgetState":{"clicks":2}}')
    expect(frame.locator("#input")).to_have_text('{"city":"Paris"}')
    expect(frame.locator("#theme")).to_have_text("light")

    page.evaluate(
        """() => window.__widgets.oa.sendToolResult({
              content: [{ type: 'text', text: '21 degrees' }],
              structuredContent: { temp: 21 },
              _meta: { 'openai/widgetSessionId': 's1' } })"""
    )
    expect(frame.locator("#output")).to_have_text('{"temp":21}')
    expect(frame.locator("#meta")).to_have_text('{"openai/widgetSessionId":"s1"}')
    expect(frame.locator("#events")).to_contain_text("last=toolOutput,toolResponseMetadata")

    frame.locator("#save").click()
    update = wait_event(page, "onUpdateModelContext", "oa")[0]
    assert update["params"] == {"structuredContent": {"clicks": 3}}
    expect(frame.locator("#state")).to_have_text('{"clicks":3}')

    frame.locator("#call").click()
    assert wait_event(page, "onCallTool", "oa")[0]["args"] == {"text": "from skybridge"}
    expect(frame.locator("#call-result")).to_have_text("from skybridge | echo: from skybridge")

    frame.locator("#followup").click()
    message = wait_event(page, "onMessage", "oa")[0]
    assert message["params"] == {"role": "user", "content": [{"type": "text", "text": "tell me more"}]}

    frame.locator("#external").click()
    page.wait_for_function("window.__events.some(e => e.type === 'window.open')")
    assert events(page, "window.open")[0]["args"][0] == "https://example.org/x"
    shot(page, "10-openai-shim")
