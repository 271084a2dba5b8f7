"""sampling/createMessage: the server asks for a model's answer. A person approves (the caller's
model runs it: tools.signals.sampling_approved), types the answer by hand, or rejects. Refused
before anyone sees it: no messages, or more text than SAMPLING_MAX_CHARS. Unanswered in time:
an error to the server."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from inspector.errors import Conflict, Invalid
from tools import callers, signals
from tools.mcp.errors import RemoteError
from tools.models import ServerRequest
from tools.runtime import events
from tools.runtime.server_requests.rows import USER_REJECTED, end, publish_request


def sampling_text_chars(params: dict[str, Any]) -> int:
    """Characters of text a sampling request asks the model to read."""
    total = len(params.get("systemPrompt") or "") if isinstance(params.get("systemPrompt"), str) else 0
    for message in params.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                total += len(block["text"])
    return total


def refusal(params: dict[str, Any]) -> str:
    """Why the request is refused before anyone sees it ('' when it may be shown)."""
    if not isinstance(params.get("messages"), list) or not params["messages"]:
        return "The sampling request has no messages."
    chars = sampling_text_chars(params)
    if chars > settings.SAMPLING_MAX_CHARS:
        return (f"The sampling request carries {chars:,} characters of text; the inspector accepts at most "
                f"{settings.SAMPLING_MAX_CHARS:,} (SAMPLING_MAX_CHARS).")
    return ""


def unanswered(reason: str) -> dict[str, Any]:
    """Nobody answered in time (or the call ended first): the server hears why, as an error."""
    raise RemoteError(USER_REJECTED, f"The sampling request was not answered: {reason}")


def answer(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    action = body.get("action")
    if action in ("reject", "cancel"):
        why = "The user rejected the sampling request." if action == "reject" else "The user closed the page without answering."
        return end(row, user, status=ServerRequest.Status.REFUSED, from_statuses=ServerRequest.OPEN, action=action,
                    response={"error": {"code": USER_REJECTED, "message": why}}, error=why)
    if action == "approve":
        return _approve(row, user, body)
    if action == "by_hand":
        return _by_hand(row, user, body)
    if action == "send":
        result = (row.answer or {}).get("result")
        if row.status != ServerRequest.Status.GENERATED or not result:
            raise Conflict("There is no generated answer to send yet.", status_now=row.status)
        text = body.get("text")
        if isinstance(text, str):  # the user edited the answer before returning it
            result = {**result, "content": {"type": "text", "text": text}}
        return end(row, user, status=ServerRequest.Status.ANSWERED, from_statuses=[ServerRequest.Status.GENERATED],
                    action="send", answer={**row.answer, "result": result}, response={"result": result})
    raise Invalid("`action` must be approve, by_hand, send, reject or cancel.")


def _by_hand(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    """A person types the model's part: the CreateMessageResult goes back as they wrote it, no
    model involved (for a server author with no model at hand, as in the official inspector)."""
    role, text = body.get("role", "assistant"), body.get("text")
    model, stop = body.get("model"), body.get("stopReason", "endTurn")
    if role not in ("user", "assistant"):
        raise Invalid("`role` must be assistant or user.")
    if not isinstance(text, str) or not text.strip():
        raise Invalid("Type the answer's text: an empty answer is not sent.")
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise Invalid("Name the model the answer is from (any name, at most 200 characters), e.g. human.")
    if not isinstance(stop, str) or len(stop) > 100:
        raise Invalid("`stopReason` must be text (endTurn, stopSequence, maxTokens or another reason).")
    result: dict[str, Any] = {"role": role, "content": {"type": "text", "text": text}, "model": model.strip()}
    if stop.strip():
        result["stopReason"] = stop.strip()
    return end(row, user, status=ServerRequest.Status.ANSWERED, from_statuses=[ServerRequest.Status.PENDING],
                action="by_hand", answer={"by_hand": True, "result": result}, response={"result": result})


def _approve(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
        isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("text"), str) for m in messages
    ):
        raise Invalid("`messages` must be a non-empty list of {role: user|assistant, text}.")
    chars = sum(len(m["text"]) for m in messages)
    if chars > settings.SAMPLING_MAX_CHARS:
        raise Invalid(f"The messages carry {chars:,} characters; at most {settings.SAMPLING_MAX_CHARS:,} are sent to a model.")
    caller_model = callers.model(row.tool_call) if row.tool_call_id else ""
    model = (body.get("model") or "").strip() if isinstance(body.get("model"), str) else ""
    api_base = (body.get("api_base") or "").strip() if isinstance(body.get("api_base"), str) else ""
    if caller_model:
        model, api_base = caller_model, ""  # the caller's model and credentials (a conversation's)
    if not model:
        raise Invalid("No model is configured for sampling: choose a model (a litellm name such as "
                       "openai/gpt-4o-mini), or reject the request.")
    system_prompt = body.get("system_prompt") if isinstance(body.get("system_prompt"), str) else row.params.get("systemPrompt")
    approved = {"messages": [{"role": m["role"], "text": m["text"]} for m in messages], "model": model,
                "api_base": api_base, "system_prompt": system_prompt or ""}
    with transaction.atomic():
        updated = ServerRequest.objects.filter(pk=row.pk, status=ServerRequest.Status.PENDING).update(
            status=ServerRequest.Status.GENERATING, answer=approved, answered_by=user, error="",
        )
    if not updated:
        row.refresh_from_db()
        raise Conflict(f"This request is not waiting for approval ({row.status}).", status_now=row.status)
    signals.sampling_approved.send(sender=ServerRequest, server_request=row)  # chat runs it (chat/sampling.py)
    row.refresh_from_db()
    publish_request(row, events.SERVER_REQUEST_UPDATED)
    return row
