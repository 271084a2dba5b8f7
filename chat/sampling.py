"""Running a server's sampling request through litellm, once the user approved it.

The server asked (sampling/createMessage, tools/runtime/server_requests.py); the user saw and possibly
edited the messages and approved; this runs them on the conversation's model with the
conversation's credentials (or, for a call made from the inspector's tool page, the model the
user chose and their saved provider key) and stores the answer as `generated`. The user sees it
before it is returned to the server.
"""

from __future__ import annotations

import logging
from typing import Any

from chat.llm import completion_kwargs, credentials, describe_provider_error, load_litellm
from chat.models import ProviderKey
from chat.tool_calls import conversation_of
from tools.runtime import events
from tools.models import ServerRequest
from tools.runtime.server_requests import publish_request

log = logging.getLogger(__name__)

STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "content_filter": "endTurn", "tool_calls": "toolUse"}


def queue_sampling(sender, server_request: ServerRequest, **kwargs) -> None:
    """tools.signals.sampling_approved: run it in a worker (chat.tasks.run_sampling)."""
    from chat.tasks import run_sampling

    run_sampling.delay(str(server_request.pk))


def _credentials(row: ServerRequest, model: str) -> dict[str, Any]:
    conversation = conversation_of(row.tool_call) if row.tool_call_id else None
    if conversation is not None:
        return credentials(conversation)
    answer = row.answer or {}
    kwargs: dict[str, Any] = {}
    provider = model.split("/", 1)[0] if "/" in model else ""
    user_id = row.answered_by_id or (row.tool_call.requested_by_id if row.tool_call_id else None)
    saved = ProviderKey.objects.filter(user=user_id, provider=provider).first() if provider and user_id else None
    if answer.get("api_base"):
        kwargs["api_base"] = answer["api_base"]
        kwargs["api_key"] = saved.api_key if saved else "no-key"
    elif saved:
        kwargs["api_key"] = saved.api_key
    return kwargs


def run(server_request_id: str) -> str:
    """Generate the answer of an approved sampling request; returns the row's new status."""
    row = ServerRequest.objects.select_related("tool_call").filter(pk=server_request_id).first()
    if row is None or row.status != ServerRequest.Status.GENERATING:
        return "skipped"
    answer = dict(row.answer or {})
    model = answer.get("model") or ""
    messages = [{"role": "system", "content": answer["system_prompt"]}] if answer.get("system_prompt") else []
    messages += [{"role": m["role"], "content": m["text"]} for m in answer.get("messages", [])]
    max_tokens, temperature = row.params.get("maxTokens"), row.params.get("temperature")
    kwargs = completion_kwargs(
        model, messages, _credentials(row, model),
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        temperature=temperature if isinstance(temperature, int | float) else None,
    )
    try:
        response = load_litellm().completion(**kwargs)
        choice = response.choices[0]
        text = choice.message.content or ""
        result = {"role": "assistant", "content": {"type": "text", "text": text}, "model": model,
                  "stopReason": STOP_REASONS.get(choice.finish_reason or "stop", "endTurn")}
    except Exception as exc:  # noqa: BLE001 - shown on the card; the user may try again or reject
        error = describe_provider_error(exc)
        log.info("sampling %s failed: %s", row.pk, error)
        ServerRequest.objects.filter(pk=row.pk, status=ServerRequest.Status.GENERATING).update(
            status=ServerRequest.Status.PENDING, error=f"The model did not answer: {error}")
        row.refresh_from_db()
        publish_request(row, events.SERVER_REQUEST_UPDATED)
        return row.status
    answer["result"] = result
    ServerRequest.objects.filter(pk=row.pk, status=ServerRequest.Status.GENERATING).update(
        status=ServerRequest.Status.GENERATED, answer=answer, error="")
    row.refresh_from_db()
    publish_request(row, events.SERVER_REQUEST_UPDATED)
    return row.status
