"""Tools an App view registers, offered to the model (issue 15.4): off unless the conversation
asks, named after the view, run by the chat page that shows the view (tests/chat/
test_browser_view_tools.py), and ended with a clear message when no page runs them."""

from __future__ import annotations

import json

import pytest

from chat import history
from chat.tool_calls import caller
from chat.models import Conversation, ViewTools
from tests.helpers import wait_for
from tools.models import Server, ToolCall

pytestmark = pytest.mark.django_db

ECHO = {"name": "marker_echo", "description": "Echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


def view_with_tools(conversation, server=None, status="succeeded") -> ToolCall:
    server = server or Server.objects.create(name="apps", transport="streamable_http", url="http://h/mcp", owner=conversation.owner)
    call = ToolCall.objects.create(server=server, tool_name="show_marker", origin="llm", **caller(conversation).row_fields(),
                                   status=status, is_app=True)
    ViewTools.objects.create(conversation=conversation, tool_call=call, tools=[ECHO])
    return call


def test_a_views_tools_are_offered_only_when_the_conversation_asks(user):
    conversation = Conversation.objects.create(owner=user, model="m")
    call = view_with_tools(conversation)
    assert "view_show_marker__marker_echo" not in [t["function"]["name"] for t in history.build(conversation).tools]
    conversation.offer_view_tools = True
    conversation.save()
    request = history.build(conversation)
    offered = {t["function"]["name"]: t["function"] for t in request.tools}
    assert offered["view_show_marker__marker_echo"]["parameters"] == ECHO["inputSchema"]
    assert "interactive view of “show_marker”" in offered["view_show_marker__marker_echo"]["description"]
    assert request.tool_map["view_show_marker__marker_echo"] == (f"{history.VIEW_KEY}{call.pk}", "marker_echo")


def test_the_api_records_a_views_tools(api, user):
    conversation = Conversation.objects.create(owner=user, model="m")
    server = Server.objects.create(name="apps", transport="streamable_http", url="http://h/mcp", owner=user)
    call = ToolCall.objects.create(server=server, tool_name="show", origin="llm", **caller(conversation).row_fields(), status="succeeded", is_app=True)
    answer = api.post(f"/api/tool-calls/{call.pk}/widget/view-tools/", {"tools": [ECHO, {"name": ""}]})
    assert answer.status_code == 400  # a nameless tool
    answer = api.post(f"/api/tool-calls/{call.pk}/widget/view-tools/", {"tools": [ECHO]})
    assert answer.status_code == 200 and ViewTools.objects.get(tool_call=call).tools[0]["name"] == "marker_echo"
    outside = ToolCall.objects.create(server=server, tool_name="show", origin="manual", requested_by=user, status="succeeded")
    assert api.post(f"/api/tool-calls/{outside.pk}/widget/view-tools/", {"tools": [ECHO]}).status_code == 409



def ask_for_the_views_tool(api, user, fake_llm, call_timeout: int, then: str) -> Conversation:
    """A turn whose model calls the tool a stored view registered, then says `then`; no page shows the view."""
    server = Server.objects.create(name="apps", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user,
                                   call_timeout=call_timeout)
    conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url, api_key="sk-test",
                                               offer_view_tools=True)
    view_with_tools(conversation, server)
    fake_llm.script([{"tool_calls": [{"name": "view_show_marker__marker_echo", "arguments": {"text": "x"}, "id": "v1"}]},
                     {"text": then}])
    assert api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "use the view"}).status_code == 202
    return conversation

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_with_no_page_to_run_it_the_call_ends_and_the_model_is_told(api, user, fake_llm):
    conversation = ask_for_the_views_tool(api, user, fake_llm, call_timeout=2, then="No view answered.")
    wait_for(lambda: Conversation.objects.get(pk=conversation.pk).status != "running", timeout=40, message="the turn to end")
    call = ToolCall.objects.get(origin="view")
    assert call.status == "timed_out" and "No open page ran the view's tool" in call.error
    assert call.view_call.tool_name == "show_marker"
    told = json.dumps(fake_llm.bodies[-1]["messages"])
    assert "No open page ran the view" in told


def test_a_call_of_a_views_tool_is_not_replayed_on_the_server(api, user):
    conversation = Conversation.objects.create(owner=user, model="m")
    view = view_with_tools(conversation)
    call = ToolCall.objects.create(server=view.server, tool_name="marker_echo", origin="view", view_call=view,
                                   **caller(conversation).row_fields(), status="succeeded")
    answer = api.post(f"/api/tool-calls/{call.pk}/replay/")
    assert answer.status_code == 409 and "ran in the browser" in answer.json()["error"]
    assert ToolCall.objects.filter(origin="replay").count() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_stop_ends_a_waiting_view_call_at_once_with_a_note_for_the_model(api, user, fake_llm):
    conversation = ask_for_the_views_tool(api, user, fake_llm, call_timeout=60, then="never")
    call = wait_for(lambda: ToolCall.objects.filter(origin="view", status="running").first(), message="the view call to wait")
    assert api.post(f"/api/conversations/{conversation.pk}/stop/").json()["stopped"] is True
    wait_for(lambda: Conversation.objects.get(pk=conversation.pk).status != "running", timeout=15, message="the turn to stop")
    call.refresh_from_db()
    # Ended here, not by a worker: the model's note is written at once (the step's task is not revoked).
    assert call.status == "cancelled" and call.projection.policy == "cancelled"
    assert Conversation.objects.get(pk=conversation.pk).turns.get().status == "stopped"
