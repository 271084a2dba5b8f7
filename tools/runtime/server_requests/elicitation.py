"""elicitation/create: a form (a flat schema of primitive fields) or a URL to open; a person answers
accept, decline or cancel. Refused before anyone sees it: a schema the spec does not allow, a URL
that is not http(s). Unanswered in time: `cancel`."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from inspector.errors import Invalid
from tools.mcp.elicitation import answer_problems, describe_problems, url_problem, with_defaults
from tools.models import ServerRequest
from tools.runtime.server_requests.rows import end

PRIMITIVES = {"string", "number", "integer", "boolean"}


def form_schema_problem(schema: Any) -> str:
    """Why an elicitation's requestedSchema is not allowed ('' when it is).

    The spec allows only a flat object whose properties are primitives (string, number,
    integer, boolean; strings may be enums or formats) and multi-select enums (an array of
    string enum items).
    """
    if not isinstance(schema, dict):
        return f"The requested schema must be a JSON object, not {type(schema).__name__}."
    if schema.get("type") != "object":
        return f"The requested schema must be an object schema (type \"object\"), not type {json.dumps(schema.get('type'))}."
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        return "The requested schema's properties must be a JSON object."
    if len(props) > 100:
        return f"The requested schema has {len(props)} properties; at most 100 are shown."
    for name, prop in props.items():
        if not isinstance(prop, dict):
            return f"Property “{name}” is not a schema object."
        kind = prop.get("type")
        if kind == "array" and _is_string_enum(prop.get("items")):
            continue
        if kind not in PRIMITIVES:
            return (f"Property “{name}” has type {json.dumps(kind)}: only string, number, integer and boolean "
                    "properties (and arrays of string choices) are allowed; nested objects and arrays are not.")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "The requested schema's required must be a list of property names."
    return ""


def _is_string_enum(items: Any) -> bool:
    if not isinstance(items, dict):
        return False
    if isinstance(items.get("enum"), list):
        return all(isinstance(v, str) for v in items["enum"])
    options = items.get("anyOf") or items.get("oneOf")
    return isinstance(options, list) and all(isinstance(o, dict) and isinstance(o.get("const"), str) for o in options)


def refusal(params: dict[str, Any]) -> str:
    """Why the request is refused before anyone sees it ('' when it may be shown)."""
    if params.get("mode", "form") not in ("form", "url"):
        return f"Unknown elicitation mode {str(params.get('mode'))[:20]!r}: only form and url exist."
    if params.get("mode") == "url":
        return url_problem(params.get("url"))
    return form_schema_problem(params.get("requestedSchema"))


def unanswered(reason: str) -> dict[str, Any]:
    """What the server gets when nobody answered in time (or the call ended first)."""
    return {"action": "cancel"}


def answer(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    action = body.get("action")
    if action not in ("accept", "decline", "cancel"):
        raise Invalid("`action` must be accept, decline or cancel.")
    result: dict[str, Any] = {"action": action}
    if action == "accept" and row.mode != "url":
        content = body.get("content")
        if not isinstance(content, dict):
            raise Invalid("`content` must be a JSON object of the requested fields.")
        schema = dict(row.params.get("requestedSchema") or {})
        content = with_defaults(schema, content)  # SEP-1034: omitted fields take the schema's defaults
        try:
            problems = answer_problems(schema, content)
        except jsonschema.SchemaError as exc:
            raise Invalid(f"The server's schema is invalid: {exc.message}") from None
        if problems:  # each shown beside its field; the message names fields by their titles
            raise Invalid(describe_problems(schema, problems), fields=problems)
        result["content"] = content
    return end(row, user, status=ServerRequest.Status.ANSWERED, from_statuses=[ServerRequest.Status.PENDING],
                action=action, answer=result, response={"result": result})
