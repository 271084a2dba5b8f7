"""One schema for a conversation's settings (issue 27 item 5): the API, the new-conversation form
and an imported file take and refuse the same values, with the same words; and one function
builds litellm's arguments for a chat step and a sampling request."""

from __future__ import annotations

import json

import pytest

from chat.llm import completion_kwargs
from chat.models import Conversation
from chat.views import ConversationForm
from tests.chat.test_replay import _with

pytestmark = pytest.mark.django_db

# name: (settings, the field refused, the schema's words for it or None where Django's own field check speaks first)
REFUSED = {
    "temperature above 2": ({"temperature": 3}, "temperature", "less than or equal to 2"),
    "temperature below 0": ({"temperature": -0.5}, "temperature", "greater than or equal to 0"),
    "an API base that is not http": ({"api_base": "ftp://models.example/v1"}, "api_base", "must be an http:// or https:// url"),
    "a system prompt over 200,000 characters": ({"system_prompt": "x" * 200_001}, "system_prompt", "at most 200000 characters"),
    "a model name over 200 characters": ({"model": "m" * 201}, "model", None),
}


def _api_error(api, values: dict) -> str:
    answer = api.post("/api/conversations/", {"model": "openai/gpt-4o-mini", **values})
    assert answer.status_code == 400, answer.content
    return answer.json()["error"]


def _form_errors(user, values: dict) -> dict:
    data = {"model": "openai/gpt-4o-mini", **{k: str(v) for k, v in values.items()}}
    form = ConversationForm(data=data, user=user)
    assert not form.is_valid()
    return form.errors


def _import_error(api, values: dict) -> str:
    document = json.loads(_with())
    document["conversation"].update(values)
    answer = api.client.post("/api/conversations/import/", data=json.dumps(document), content_type="application/json")
    assert answer.status_code == 400, answer.content
    return answer.json()["error"]


@pytest.mark.parametrize("name", list(REFUSED))
def test_the_api_the_form_and_an_import_refuse_the_same_settings_in_the_same_words(api, user, name):
    values, field, words = REFUSED[name]
    api_error, form_errors, import_error = _api_error(api, values), _form_errors(user, values), _import_error(api, values)
    assert f"`{field}`" in api_error
    assert field in form_errors
    assert f"conversation.{field}" in import_error
    if words:
        assert words in api_error.lower()
        assert any(words in e.lower() for e in form_errors[field])
        assert words in import_error.lower()
    assert not Conversation.objects.exists()


def test_the_api_the_form_and_an_import_take_the_same_limits(api, user):
    values = {"model": "m" * 200, "temperature": 2, "api_base": "https://models.example/v1", "system_prompt": "x" * 200_000}
    assert api.post("/api/conversations/", values).status_code == 201
    assert ConversationForm(data={k: str(v) for k, v in values.items()}, user=user).is_valid()
    document = json.loads(_with())
    document["conversation"].update(values)
    answer = api.client.post("/api/conversations/import/", data=json.dumps(document), content_type="application/json")
    assert answer.status_code in (200, 201), answer.content
    stored = Conversation.objects.order_by("pk")
    assert [(c.model, c.temperature, c.system_prompt == "x" * 200_000) for c in stored] == [("m" * 200, 2.0, True)] * 2


def test_a_patch_sets_only_what_it_sends(api):
    pk = api.post("/api/conversations/", {"model": "openai/gpt-4o-mini", "temperature": 0.5,
                                           "system_prompt": "Be brief."}).json()["id"]
    assert api.patch(f"/api/conversations/{pk}/", {"title": "t" * 300}).status_code == 200
    c = Conversation.objects.get(pk=pk)
    assert (c.title, c.model, c.temperature, c.system_prompt) == ("t" * 200, "openai/gpt-4o-mini", 0.5, "Be brief.")
    answer = api.patch(f"/api/conversations/{pk}/", {"model": ""})
    assert answer.status_code == 400 and "`model` is required" in answer.json()["error"]


def test_one_function_builds_litellms_arguments_for_a_chat_step_and_a_sampling_request(settings):
    settings.LLM_TIMEOUT = 42
    creds = {"api_base": "http://models.example/v1", "api_key": "k"}
    messages = [{"role": "user", "content": "hi"}]
    step = completion_kwargs("openai/m", messages, creds, temperature=0.0, tools=[{"type": "function"}], stream=True)
    sampling = completion_kwargs("openai/m", messages, creds, temperature=0.0, max_tokens=5)
    assert step == {"model": "openai/m", "messages": messages, "stream": True, "stream_options": {"include_usage": True},
                    "timeout": 42, "num_retries": 0, "max_retries": 0, "tools": [{"type": "function"}],
                    "api_base": "http://models.example/v1", "api_key": "k", "temperature": 0.0}
    assert sampling == {"model": "openai/m", "messages": messages, "timeout": 42, "num_retries": 0, "max_retries": 0,
                        "api_base": "http://models.example/v1", "api_key": "k", "temperature": 0.0, "max_tokens": 5}
    assert "temperature" not in completion_kwargs("openai/m", messages, {})  # unset options are not sent


def test_a_conversation_names_at_most_a_thousand_servers(api):
    """A list longer than any team has servers is refused in words, not sent to the database
    (PostgreSQL takes at most 65,535 parameters a statement)."""
    answer = api.post("/api/conversations/", {"model": "openai/gpt-4o-mini", "server_ids": list(range(1, 1002))})
    assert answer.status_code == 400 and "`server_ids`" in answer.json()["error"]
    assert "at most 1000" in answer.json()["error"]
    answer = api.post("/api/conversations/", {"model": "openai/gpt-4o-mini", "server_ids": list(range(1, 1001))})
    assert answer.status_code == 404 and "Unknown server id(s)" in answer.json()["error"]
    assert not Conversation.objects.exists()
