"""A message an App view sends (ui/message) is stored as the view's, and the person can be asked
first (issue 15.6). The browser side is in tests/chat/test_browser.py."""

from __future__ import annotations

import pytest

from chat.tool_calls import caller
from chat.models import Conversation, Message
from tools.models import Server, ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user, model="openai/test-model")


def app_call(conversation, **extra) -> ToolCall:
    server = Server.objects.create(name="apps", transport="streamable_http", url="http://h/mcp", owner=conversation.owner)
    return ToolCall.objects.create(server=server, tool_name="show", origin="llm", **caller(conversation).row_fields(),
                                   status="succeeded", is_app=True, **extra)


def test_a_views_message_names_the_view_in_the_api(api, conversation):
    call = app_call(conversation)
    answer = api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "from the view", "from_tool_call": str(call.pk)})
    assert answer.status_code == 202, answer.json()
    message = Message.objects.get(conversation=conversation, text="from the view")
    assert message.role == "user" and message.from_view_id == call.pk
    shown = api.get(f"/api/conversations/{conversation.pk}/").json()["messages"][-1]
    assert shown["from_view"] == {"tool_call_id": str(call.pk), "tool": "show"}


def test_a_call_of_another_conversation_is_refused(api, user, conversation):
    elsewhere = app_call(Conversation.objects.create(owner=user, model="m"))
    answer = api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "x", "from_tool_call": str(elsewhere.pk)})
    assert answer.status_code == 400 and "not a tool call of this conversation" in answer.json()["error"]
    assert not Message.objects.filter(conversation=conversation).exists()


def test_asking_first_is_on_by_default_and_can_be_turned_off(api, conversation):
    assert api.get(f"/api/conversations/{conversation.pk}/").json()["confirm_view_messages"] is True
    assert api.patch(f"/api/conversations/{conversation.pk}/", {"confirm_view_messages": False}).status_code == 200
    conversation.refresh_from_db()
    assert conversation.confirm_view_messages is False


def test_the_calls_a_view_made_come_with_the_page(api, conversation):
    call = app_call(conversation)
    Message.objects.create(conversation=conversation, seq=1, role="tool", tool_call=call, text="t")
    child = ToolCall.objects.create(server=call.server, tool_name="inc", origin="widget", **caller(conversation).row_fields(),
                                    status="succeeded", view_call=call)
    calls = {c["id"]: c for c in api.get(f"/api/conversations/{conversation.pk}/").json()["tool_calls"]}
    assert calls[str(child.pk)]["view_call_id"] == str(call.pk)
