"""Headless Chromium: answering what a server asks the way the official inspector allows (issue 28).

An elicitation form comes filled with every default the server's schema gives (string, integer,
decimal number, boolean, untitled and titled single and multi enums, legacy enumNames), so
typing the one required field and one click on Accept answers it; a refused answer is shown
beside its field, named by the field's title. A sampling request can be answered by hand (role,
text, model name, stop reason) when no model is at hand; that answer reaches the server as its
CreateMessageResult and is stored like a model's.

The asks server, its worker with a call timeout a person can answer within, and `open_tool` are
tests/tools/test_browser_server_requests.py's."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.tools.test_browser_server_requests import asks, asks_server_http, open_tool, patient_worker  # noqa: F401
from chat.tool_calls import conversation_key
from tools.models import ServerRequest, ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ALL_DEFAULTS = {"agree": True, "count": 7, "moons": ["m-2"], "motto": "Measure twice.", "planet": "p-4", "ratio": 2.75,
                "shade": "s-2", "size": "M", "toppings": ["basil"]}


def result_text(call: ToolCall) -> str:
    return call.full_result.raw["content"][0]["text"]


def test_elicitation_is_accepted_with_the_servers_defaults_in_one_click(browser, live_app, asks, screenshots):
    page = open_tool(browser, live_app, asks, "ask_defaults", {})
    card = page.wait_for_selector(".server-request.pending form.elicitation-form", timeout=20000)
    form = ".server-request form.elicitation-form"
    # Every default is there before anyone types: the five kinds, single and multi enums, titled or not.
    assert page.input_value(f"{form} input[name=motto]") == "Measure twice."
    assert page.input_value(f"{form} input[name=count]") == "7"
    assert page.input_value(f"{form} input[name=ratio]") == "2.75"
    assert page.get_attribute(f"{form} input[name=ratio]", "step") == "any"
    assert page.is_checked(f"{form} input[name=agree]")
    assert page.input_value(f"{form} select[name=size]") == "M"
    assert page.input_value(f"{form} select[name=planet]") == "p-4"
    assert page.input_value(f"{form} select[name=shade]") == "s-2"
    assert page.eval_on_selector_all(f"{form} [data-field=toppings] input:checked", "bs => bs.map(b => b.value)") == ["basil"]
    assert page.eval_on_selector_all(f"{form} [data-field=moons] input:checked", "bs => bs.map(b => b.value)") == ["m-2"]
    # Titled choices show their titles; an untitled property shows its name.
    assert "Deimos" in page.inner_text(f"{form} [data-field=moons]")
    assert "Dark" in page.inner_text(f"{form} [data-field=shade]")
    assert page.inner_text(f"{form} [data-field=size] .label").strip() == "size"
    page.fill(f"{form} input[name=name]", "Ann")
    page.screenshot(path=str(screenshots / "elicitation-defaults.png"), full_page=True)
    card.query_selector("button.primary").click()  # one click
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    call = ToolCall.objects.get(server=asks, tool_name="ask_defaults")
    assert result_text(call) == f"accept {json.dumps({**ALL_DEFAULTS, 'name': 'Ann'}, sort_keys=True)}"
    page.wait_for_selector(".server-request.answered")

    # An answer the schema refuses: the error sits beside the field and names it by its title.
    page.click("#run-tool")
    card = page.wait_for_selector(".server-request.pending form.elicitation-form", timeout=20000)
    page.fill(f"{form} input[name=name]", "Bo")
    page.uncheck(f"{form} [data-field=moons] input[value=m-2]")
    card.query_selector("button.primary").click()
    beside = page.wait_for_selector(f"{form} [data-field=moons].invalid .field-error", timeout=30000)
    assert beside.inner_text() == "Choose at least 1."
    summary = page.inner_text(f"{form} > p.error")
    assert summary == "Moons: choose at least 1." and "moons" not in summary
    page.screenshot(path=str(screenshots / "elicitation-field-error.png"), full_page=True)
    page.check(f"{form} [data-field=moons] input[value=m-1]")
    card.query_selector("button.primary").click()
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    second = ToolCall.objects.filter(server=asks, tool_name="ask_defaults").exclude(pk=call.pk).get()
    assert result_text(second) == f"accept {json.dumps({**ALL_DEFAULTS, 'moons': ['m-1'], 'name': 'Bo'}, sort_keys=True)}"
    page.context.close()


def test_sampling_is_answered_by_hand_without_a_model(browser, live_app, asks, user, screenshots):
    page = open_tool(browser, live_app, asks, "ask_model_verbatim", {"text": "Name a cat."})
    # Both ways are offered: through litellm (no model is configured here), or by hand. (The card's
    # boxes are filled in after the card itself appears: wait for the button, not only the card.)
    page.wait_for_selector(".server-request.sampling.pending .sampling-by-model button:has-text('Run through litellm')",
                           timeout=20000)
    hand = ".server-request .sampling-by-hand"
    assert page.input_value(f"{hand} select[name=role]") == "assistant"
    assert page.input_value(f"{hand} input[name=stopReason]") == "endTurn"
    page.fill(f"{hand} textarea[name=text]", "Tom.")
    page.fill(f"{hand} input[name=model]", "hand-typed")
    page.fill(f"{hand} input[name=stopReason]", "stopSequence")
    page.screenshot(path=str(screenshots / "sampling-by-hand.png"), full_page=True)
    page.click(f"{hand} button:has-text('Send to server')")
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    page.wait_for_selector(".server-request.answered >> text=by hand", timeout=30000)
    page.screenshot(path=str(screenshots / "sampling-by-hand-answered.png"), full_page=True)

    sent = {"role": "assistant", "content": {"type": "text", "text": "Tom."}, "model": "hand-typed", "stopReason": "stopSequence"}
    call = ToolCall.objects.get(server=asks, tool_name="ask_model_verbatim")
    assert json.loads(result_text(call)) == sent  # what the server received
    row = ServerRequest.objects.get(tool_call=call, kind="sampling")
    assert (row.status, row.action, row.answered_by_id) == ("answered", "by_hand", user.pk)
    assert row.response == {"result": sent} and row.answer == {"by_hand": True, "result": sent}

    # An empty answer is refused beside the form, and nothing goes to the server.
    page.click("#run-tool")
    page.wait_for_selector(".server-request.sampling.pending", timeout=20000)
    page.click(f"{hand} button:has-text('Send to server')")
    page.wait_for_selector(f"{hand} .error >> text=Type the answer's text", timeout=30000)
    assert page.locator("#run-status.running").count() == 1
    page.click(".server-request.sampling.pending button:has-text('Reject')")
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    page.context.close()


def test_chat_sampling_card_answered_by_hand_and_the_turn_goes_on(browser, live_app, user, fake_llm, asks, screenshots):
    from tests.tools.test_browser_server_requests import ask_in_chat

    conversation, page = ask_in_chat(browser, live_app, user, fake_llm, asks, [
        {"text": "Asking.", "tool_calls": [{"name": "asks__ask_model", "arguments": {"text": "Name a fish."}, "id": "s1"}]},
        {"text": "It said **Wanda**."},
    ])
    page.wait_for_selector(".tool-card .server-request.sampling.pending", timeout=20000)
    # The litellm way names the conversation's model (the card fills in after "loading…").
    expect(page.locator(".tool-card .server-request.sampling.pending")).to_contain_text("openai/test-model", timeout=10000)
    hand = ".tool-card .server-request .sampling-by-hand"
    page.fill(f"{hand} textarea[name=text]", "Wanda")
    page.screenshot(path=str(screenshots / "sampling-by-hand-chat.png"), full_page=True)
    page.click(f"{hand} button:has-text('Send to server')")
    page.wait_for_selector(".tool-card .status.succeeded", timeout=20000)
    page.wait_for_selector(".msg.assistant strong >> text=Wanda", timeout=20000)
    row = ServerRequest.objects.get(tool_call__caller=conversation_key(conversation.pk), kind="sampling")
    assert (row.status, row.action) == ("answered", "by_hand")
    assert len(fake_llm.requests) == 2  # the conversation's two steps: no model ran for the sampling
    tool_message = [m for m in fake_llm.requests[-1]["body"]["messages"] if m.get("role") == "tool"]
    assert tool_message[0]["content"] == "model human said: Wanda"
    page.context.close()
