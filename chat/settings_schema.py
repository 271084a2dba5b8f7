"""One schema for a conversation's settings: model, API base and key, system prompt, temperature,
servers and the switches.

Why one: the JSON API (chat/api.py), the new-conversation form (chat/views.py) and export/import
(chat/archive.py) each checked these on their own, with their own limits (a system prompt the API
took could not be imported again). Now each field's rule is written once here: the API body is
`ConversationSettings`, the form validates its values through it (`form_errors`), and the file's
`conversation` part (chat/archive.py) is built from the same field types, strict as a file is.
What reaches litellm is built in one place too: chat/llm.py `completion_kwargs`.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StrictInt
from pydantic import ValidationError as PydanticValidationError

from inspector.api import Body

MODEL_MAX_CHARS = 200
API_BASE_MAX_CHARS = 500
SYSTEM_PROMPT_MAX_CHARS = 200_000
TITLE_MAX_CHARS = 200
TEMPERATURE_MIN, TEMPERATURE_MAX = 0, 2
SERVERS_MAX = 1000  # servers one conversation may use (a list longer than this is a mistake, not a setting)

MODEL_REQUIRED = "`model` is required: a litellm model name such as openai/gpt-4o-mini or ollama/llama3."


def _http_only(value: str) -> str:
    if value and urlsplit(value).scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    return value


ModelName = Annotated[str, Field(max_length=MODEL_MAX_CHARS)]
ApiBase = Annotated[str, Field(max_length=API_BASE_MAX_CHARS), AfterValidator(_http_only)]
SystemPrompt = Annotated[str, Field(max_length=SYSTEM_PROMPT_MAX_CHARS)]
Temperature = Annotated[float, Field(ge=TEMPERATURE_MIN, le=TEMPERATURE_MAX)]
ServerIds = Annotated[list[StrictInt], Field(max_length=SERVERS_MAX)]


class ConversationSettings(Body):
    """The settings as created (POST, the form) or changed (PATCH: only the fields sent)."""

    model: ModelName | None = None
    api_base: ApiBase | None = None
    api_key: str | None = None
    system_prompt: SystemPrompt | None = None
    temperature: Temperature | None = None
    server_ids: ServerIds | None = None
    title: str | None = None
    confirm_view_messages: bool | None = None
    offer_view_tools: bool | None = None
    use_tasks: bool | None = None
    shared: bool | None = None


def model_fields(body: ConversationSettings, partial: bool) -> dict[str, Any]:
    """The Conversation fields `body` sets (servers aside: they are looked up for the user);
    on a PATCH (`partial`) only those sent. Raises ValueError(MODEL_REQUIRED) without a model."""
    sent = body.model_fields_set
    out: dict[str, Any] = {}
    if "model" in sent or not partial:
        if not body.model:
            raise ValueError(MODEL_REQUIRED)
        out["model"] = body.model
    for name in ("api_base", "api_key", "system_prompt"):
        if name in sent:
            out[name] = getattr(body, name) or ""
    if "title" in sent:
        out["title"] = (body.title or "")[:TITLE_MAX_CHARS]
    for name in ("confirm_view_messages", "offer_view_tools", "use_tasks", "shared", "temperature"):
        if getattr(body, name) is not None:
            out[name] = getattr(body, name)
    return out


def form_errors(values: dict[str, Any]) -> dict[str, list[str]]:
    """The schema's problems with a form's values, per field (the form shows them under each)."""
    data = {k: v for k, v in values.items() if k in ConversationSettings.model_fields and v not in (None, "")}
    try:
        ConversationSettings.model_validate(data)
    except PydanticValidationError as exc:
        errors: dict[str, list[str]] = {}
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else "__all__"
            message = error["msg"].removeprefix("Value error, ")
            errors.setdefault(field, []).append(f"{message[0].upper()}{message[1:]}.")
        return errors
    return {}
