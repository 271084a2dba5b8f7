"""Headless Chromium against the real app (daphne), worker, MCP servers and the recording LLM:
the chat streams, tool cards show, and MCP App widgets render in their sandbox."""

from __future__ import annotations

import json
import re

import pytest

from chat.tool_calls import calls_of, conversation_id_of
from chat.models import Conversation, Message, ModelContext
from tests.helpers import login_page, refresh_tools, wait_for
from tools.models import ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def make_conversation(user, fake_llm, servers, **fields) -> Conversation:
    conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url, api_key="sk-test",
                                               **fields)
    conversation.servers.set(servers)
    return conversation


def open_chat(browser, live_app, conversation: Conversation):
    """Alice's chat page for `conversation`, with its WebSocket live."""
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    return page


def send(page, text: str) -> None:
    page.fill("#composer-text", text)
    page.press("#composer-text", "Enter")


def widget_frame(page):
    """The view's document: the inner iframe inside the sandbox proxy's iframe."""
    return page.frame_locator(".widget-slot iframe").frame_locator("iframe")


def test_chat_streams_answer_and_shows_tool_card(browser, live_app, user, fake_llm, basic_server, screenshots):
    refresh_tools(basic_server)
    conversation = make_conversation(user, fake_llm, [basic_server])
    fake_llm.script([
        {"text": "Calling echo now.", "tool_calls": [{"name": "basic__echo", "arguments": {"text": "hi from the model"}, "id": "e1"}]},
        {"text": "The tool said **hi from the model**. <script>window.pwned = 1</script><img src=x onerror=\"window.pwned=2\">",
         "chunk_delay": 0.05},
    ])
    page = open_chat(browser, live_app, conversation)
    send(page, "please echo")
    page.wait_for_selector(".msg.user >> text=please echo")
    card = page.wait_for_selector(".tool-card .status.succeeded", timeout=30000)
    assert card is not None
    page.wait_for_selector(".msg.assistant strong >> text=hi from the model", timeout=30000)
    assert page.evaluate("window.pwned") is None, "model text must not run script"
    assert page.locator(".msg.assistant script").count() == 0
    # The full result is fetched (over HTTP) when the card is opened.
    assert page.locator(".tool-card .full-json").is_hidden()
    page.click(".tool-card .toggle button:has-text('Full result')")
    page.wait_for_selector(".tool-card .full-json >> text=hi from the model", timeout=10000)
    page.click(".tool-card .toggle button:has-text('What the model saw')")
    assert "hi from the model" in page.locator(".tool-card .projection-text").inner_text()
    page.wait_for_selector("#llm-view .llm-msg.tool")
    assert page.input_value("#conversation-title") == "please echo"
    # The message list scrolls inside the page: the composer stays on screen.
    box = page.locator("#composer").bounding_box()
    assert box and box["y"] + box["height"] <= page.viewport_size["height"]
    page.screenshot(path=str(screenshots / "chat.png"), full_page=True)
    page.context.close()


def test_app_widget_renders_full_result_and_talks_back(browser, live_app, user, fake_llm, app_server, screenshots):
    refresh_tools(app_server)
    conversation = make_conversation(user, fake_llm, [app_server])
    fake_llm.script([
        {"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": "w"}, "id": "w1"}]},
        {"text": "Here is your view."},
    ])
    page = open_chat(browser, live_app, conversation)
    send(page, "show the widget")
    view = widget_frame(page)
    view.locator("#secret", has_text="STRUCTURED-MARKER-w").wait_for(timeout=30000)
    assert view.locator("#content").inner_text() == "CONTENT-MARKER-w"
    assert json.loads(view.locator("#tool-input").inner_text()) == {"label": "w"}
    page.wait_for_selector(".msg.assistant >> text=Here is your view.")
    page.screenshot(path=str(screenshots / "widget.png"), full_page=True)

    # Isolation: the view cannot read the inspector's cookies or DOM.
    assert view.locator("#cookie").inner_text().startswith("blocked:")
    assert view.locator("#parent-dom").inner_text().startswith("blocked:")

    # A tools/call from the view runs through the pipeline with origin "widget".
    view.locator("#call").click()
    view.locator("#call-result").filter(has_not_text="calling").wait_for(timeout=20000)
    assert not view.locator("#call-result").inner_text().startswith("ERROR"), view.locator("#call-result").inner_text()
    widget_call = wait_for(lambda: ToolCall.objects.filter(origin="widget", tool_name="app_only_increment").first(),
                           message="the widget's stored tool call")
    assert conversation_id_of(widget_call) == conversation.pk and widget_call.status == "succeeded"

    # A tool hidden from apps is refused, and nothing is called.
    view.locator("#hidden").click()
    view.locator("#hidden-result", has_text="ERROR").wait_for(timeout=10000)
    assert "not visible to apps" in view.locator("#hidden-result").inner_text()
    assert not ToolCall.objects.filter(tool_name="model_only").exists()

    # ui/update-model-context is stored and enters the next LLM request.
    view.locator("#context").click()
    view.locator("#context-result", has_text=re.compile(r"^ok$")).wait_for(timeout=10000)
    assert ModelContext.objects.filter(conversation=conversation).exists()
    fake_llm.script([{"text": "I see the context."}])
    send(page, "what does the widget say?")
    page.wait_for_selector(".msg.assistant >> text=I see the context.", timeout=30000)
    last = json.dumps(fake_llm.bodies[-1]["messages"])
    assert "WIDGET-CONTEXT-MARKER" in last

    # The view's own calls are listed under its card, folded, with their status.
    card_calls = page.locator(".tool-card .view-calls")
    card_calls.locator("summary", has_text="Calls from this view (1)").wait_for(timeout=10000)
    card_calls.locator("li", has_text="app_only_increment").locator(".status.succeeded").wait_for(state="attached", timeout=10000)

    # ui/message from the view: the person is asked first; declining tells the view no.
    # Only once the page has heard the turn end: while it runs, the page refuses a view's
    # message without asking (the answer's text shows a moment before `turn.completed` comes).
    page.wait_for_selector("#send:enabled", timeout=10000)
    answers, asked = ["dismiss", "accept"], []

    def answer(dialog):
        asked.append(dialog.message)
        dialog.accept() if answers.pop(0) == "accept" else dialog.dismiss()

    page.on("dialog", answer)
    view.locator("#message").click()
    view.locator("#message-result", has_text="ERROR").wait_for(timeout=10000)
    assert len(asked) == 1  # declined in the dialog, not refused for a running turn
    assert not Message.objects.filter(conversation=conversation, text="WIDGET-MESSAGE-MARKER").exists()
    # Accepted, it becomes a user message marked as the view's, and starts a turn.
    fake_llm.script([{"text": "Got your widget message."}])
    view.locator("#message").click()
    page.wait_for_selector(".msg.user.from-view >> text=WIDGET-MESSAGE-MARKER", timeout=20000)
    assert answers == [] and len(asked) == 2
    assert "show_marker" in asked[1] and "WIDGET-MESSAGE-MARKER" in asked[1]
    assert page.locator(".msg.user.from-view .role").inner_text() == "App view · show_marker"
    page.wait_for_selector(".msg.assistant >> text=Got your widget message.", timeout=30000)
    sent = Message.objects.get(conversation=conversation, text="WIDGET-MESSAGE-MARKER")
    assert sent.from_view.tool_name == "show_marker" and sent.from_view.origin == "llm"

    # The model never saw anything that only structuredContent or _meta hold.
    wire = json.dumps(fake_llm.bodies)
    assert "STRUCTURED-MARKER" not in wire and "META-MARKER" not in wire
    page.screenshot(path=str(screenshots / "widget-after.png"), full_page=True)

    # Reopening re-renders the widget from the stored result, without calling the tool again.
    calls_before = ToolCall.objects.filter(tool_name="show_marker").count()
    page.reload()
    widget_frame(page).locator("#secret", has_text="STRUCTURED-MARKER-w").wait_for(timeout=30000)
    assert ToolCall.objects.filter(tool_name="show_marker").count() == calls_before
    page.context.close()


def test_app_view_opens_while_the_model_streams_and_gets_partial_input(browser, live_app, user, fake_llm, app_server, screenshots):
    refresh_tools(app_server)
    conversation = make_conversation(user, fake_llm, [app_server])
    label = "partial-" + "abcdefgh" * 8
    fake_llm.script([
        {"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": label}, "id": "s1"}], "chunk_delay": 0.35},
        {"text": "Streamed view done."},
    ])
    page = open_chat(browser, live_app, conversation)
    send(page, "stream the widget")
    # The card and the view appear while the model is still writing the arguments.
    page.wait_for_selector(".tool-card .status.streaming", timeout=20000)
    view = widget_frame(page)
    view.locator("#tool-input-partial", has_text="partial-").wait_for(timeout=20000)
    assert not ToolCall.objects.filter(tool_name="show_marker").exists(), "the call row exists only once streaming ends"
    page.screenshot(path=str(screenshots / "widget-streaming.png"), full_page=True)

    # Then the complete input and the full result reach the same view (not a reloaded one).
    view.locator("#secret", has_text=f"STRUCTURED-MARKER-{label}").wait_for(timeout=30000)
    assert json.loads(view.locator("#tool-input").inner_text()) == {"label": label}
    count, partial = view.locator("#tool-input-partial").inner_text().split(" ", 1)
    assert int(count) >= 1 and label.startswith(json.loads(partial).get("label", ""))
    page.wait_for_selector(".msg.assistant >> text=Streamed view done.", timeout=30000)
    assert page.locator(".tool-card").count() == 1 and page.locator(".widget-slot iframe").count() == 1
    call = ToolCall.objects.get(tool_name="show_marker")
    assert page.locator(f'.tool-card[data-tool-call="{call.pk}"] .status.succeeded').count() == 1

    # The adopted view talks to the server through the real call's row.
    view.locator("#call").click()
    view.locator("#call-result").filter(has_not_text="calling").wait_for(timeout=20000)
    widget_call = wait_for(lambda: ToolCall.objects.filter(origin="widget", tool_name="app_only_increment").first(),
                           message="the widget's stored tool call")
    assert conversation_id_of(widget_call) == conversation.pk
    page.context.close()


def test_a_streamed_call_that_is_never_made_goes_away_and_leaves_the_app_view_alone(browser, live_app, user, fake_llm, app_server):
    refresh_tools(app_server)
    conversation = make_conversation(user, fake_llm, [app_server])
    fake_llm.script([
        {"tool_calls": [{"name": "nope__missing", "arguments": {"x": "unknown tool"}, "id": "u1"},
                        {"name": "apps__show_marker", "arguments": {"label": "second"}, "id": "u2"}], "chunk_delay": 0.2},
        {"text": "One of them worked."},
    ])
    page = open_chat(browser, live_app, conversation)
    send(page, "two calls")
    page.wait_for_selector(".tool-card .status.streaming", timeout=20000)
    page.wait_for_selector(".msg.assistant >> text=One of them worked.", timeout=40000)
    # The unknown tool's card is gone (the chat says so in a tool note); the App card stayed and kept its view.
    assert page.locator(".tool-card").count() == 1
    assert page.locator(".tool-note", has_text="Unknown tool").count() == 1
    widget_frame(page).locator("#secret", has_text="STRUCTURED-MARKER-second").wait_for(timeout=20000)
    page.context.close()


def test_a_stopped_turn_removes_the_streamed_card(browser, live_app, user, fake_llm, basic_server):
    refresh_tools(basic_server)
    conversation = make_conversation(user, fake_llm, [basic_server])
    fake_llm.script([{"tool_calls": [{"name": "basic__echo", "arguments": {"text": "y" * 200}, "id": "z1"}], "chunk_delay": 0.3}])
    page = open_chat(browser, live_app, conversation)
    send(page, "start and stop")
    page.wait_for_selector(".tool-card .status.streaming", timeout=20000)
    page.click("#stop")
    page.wait_for_selector("#turn-notice >> text=Stopped.", timeout=20000)
    assert page.locator(".tool-card").count() == 0
    assert not calls_of(conversation).exists()
    page.context.close()


def test_official_example_app_initialises_against_our_host(browser, live_app, user, fake_llm, vanilla_app_http, screenshots):
    from tools.models import Server

    server = Server.objects.create(name="vanilla", transport="streamable_http", url=vanilla_app_http.url, owner=user)
    refresh_tools(server)
    conversation = make_conversation(user, fake_llm, [server])
    fake_llm.script([{"tool_calls": [{"name": "vanilla__get-time", "arguments": {}, "id": "t1"}]}, {"text": "There is the time."}])
    page = open_chat(browser, live_app, conversation)
    send(page, "what time is it?")
    call = wait_for(lambda: calls_of(conversation).filter(status="succeeded").first(), message="get-time")
    shown_time = call.full_result.raw["structuredContent"]["time"]
    view = widget_frame(page)
    view.locator("#server-time", has_text=shown_time).wait_for(timeout=30000)
    page.screenshot(path=str(screenshots / "official-vanilla-app.png"), full_page=True)
    # Its own button calls the tool again through our pipeline (origin "widget").
    view.locator("#get-time-btn").click()
    wait_for(lambda: ToolCall.objects.filter(origin="widget", tool_name="get-time", status="succeeded").exists(),
             message="the view's own tools/call")
    page.context.close()


def test_openai_apps_sdk_widget_and_its_state_survive_a_reload(browser, live_app, user, fake_llm, compat_server, screenshots):
    refresh_tools(compat_server)
    conversation = make_conversation(user, fake_llm, [compat_server])
    fake_llm.script([{"tool_calls": [{"name": "compat__openai_widget", "arguments": {"label": "o"}, "id": "o1"}]},
                     {"text": "Widget shown."}])
    page = open_chat(browser, live_app, conversation)
    send(page, "open the widget")
    view = widget_frame(page)
    view.locator("#output", has_text="OPENAI-STRUCTURED-o").wait_for(timeout=30000)
    assert view.locator("#meta").inner_text() == "OPENAI-META-o"
    assert page.locator(".widget-slot .help", has_text="text/html+skybridge").count() == 1
    view.locator("#save").click()
    view.locator("#state", has_text='{"count":1}').wait_for(timeout=10000)
    wait_for(lambda: ModelContext.objects.filter(conversation=conversation, structured={"count": 1}).exists(),
             message="the saved widget state")
    view.locator("#call").click()
    view.locator("#call-result", has_text="OPENAI-STRUCTURED-again").wait_for(timeout=20000)
    page.screenshot(path=str(screenshots / "openai-widget.png"), full_page=True)
    page.reload()
    view = widget_frame(page)
    view.locator("#state", has_text='{"count":1}').wait_for(timeout=30000)
    # The widget state is context for the model; the structured output and _meta never are.
    fake_llm.script([{"text": "noted"}])
    send(page, "and now?")
    page.wait_for_selector(".msg.assistant >> text=noted", timeout=30000)
    assert '{\\"count\\": 1}' in json.dumps(fake_llm.bodies[-1]["messages"])
    wire = json.dumps(fake_llm.bodies)
    assert "OPENAI-CONTENT-o" in wire and "OPENAI-STRUCTURED" not in wire and "OPENAI-META" not in wire
    page.context.close()


def test_mcp_ui_embedded_resource_renders_and_model_gets_a_note(browser, live_app, user, fake_llm, compat_server):
    refresh_tools(compat_server)
    conversation = make_conversation(user, fake_llm, [compat_server])
    fake_llm.script([{"tool_calls": [{"name": "compat__mcpui_view", "arguments": {"label": "u"}, "id": "u1"}]},
                     {"text": "Inline view shown."}])
    page = open_chat(browser, live_app, conversation)
    send(page, "inline view please")
    widget_frame(page).locator("#mcpui", has_text="MCPUI-MARKER-u").wait_for(timeout=30000)
    page.wait_for_selector(".msg.assistant >> text=Inline view shown.", timeout=30000)
    wire = json.dumps(fake_llm.bodies)
    assert "MCPUI-MARKER" not in wire and "MCPUI-TEXT-u" in wire
    assert "[Interactive view ui://mcpui/u was shown to the user.]" in wire
    page.context.close()
