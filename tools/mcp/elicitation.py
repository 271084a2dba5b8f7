"""What an elicitation answer holds besides what the person typed (Django-free: the
conformance client uses it too, conformance/client.py)."""

from __future__ import annotations

from typing import Any


def with_defaults(schema: Any, content: dict[str, Any]) -> dict[str, Any]:
    """SEP-1034: a field the answer leaves out takes the default the server's schema gives it."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    filled = dict(content)
    for name, prop in (properties or {}).items() if isinstance(properties, dict) else ():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled


def title_of(schema: Any, name: str) -> str:
    """How the form names a property: its title, else its name."""
    prop = (schema.get("properties") or {}).get(name) if isinstance(schema, dict) else None
    title = prop.get("title") if isinstance(prop, dict) else None
    return title if isinstance(title, str) and title.strip() else name


_KINDS = {"string": "text", "number": "a number", "integer": "a whole number", "boolean": "true or false",
          "array": "a list of choices", "object": "an object"}


def _say(error: Any) -> str:
    """One schema error in a person's words, without the property's name (the form shows it)."""
    n, item = error.validator_value, len(error.absolute_path) > 1  # inside a multi-select's list
    said = {
        "minItems": f"Choose at least {n}.", "maxItems": f"Choose at most {n}.",
        "uniqueItems": "Choose each item once.",
        "minimum": f"Must be at least {n}.", "maximum": f"Must be at most {n}.",
        "exclusiveMinimum": f"Must be more than {n}.", "exclusiveMaximum": f"Must be less than {n}.",
        "minLength": f"Must be at least {n} characters long.", "maxLength": f"Must be at most {n} characters long.",
        "pattern": f"Must match {n}.", "format": f"Must be a valid {n}.",
        "enum": "Not one of the choices.", "const": "Not one of the choices.",
        "oneOf": "Not one of the choices.", "anyOf": "Not one of the choices.",
    }.get(error.validator)
    if error.validator == "type":
        kinds = n if isinstance(n, list) else [n]
        said = "Must be " + " or ".join(_KINDS.get(k, str(k)) for k in kinds) + "."
    if said and item and error.validator in ("enum", "const", "oneOf", "anyOf"):
        said = "Holds something that is not one of the choices."
    return said or (error.message[:1].upper() + error.message[1:] + ("" if error.message.endswith(".") else "."))


def answer_problems(schema: dict[str, Any], content: dict[str, Any]) -> dict[str, str]:
    """What is wrong with an accepted form's content, per property ("" for the form as a whole),
    worded to be shown beside the field; {} when the server's schema accepts it.

    Fields the schema does not name are refused. Raises jsonschema.SchemaError for a schema that
    is not valid JSON Schema.
    """
    import jsonschema

    schema = {**schema}
    schema.setdefault("additionalProperties", False)
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    problems: dict[str, str] = {}
    for error in sorted(validator(schema).iter_errors(content), key=lambda e: [str(p) for p in e.absolute_path]):
        path = list(error.absolute_path)
        if not path and error.validator == "required":
            for name in error.validator_value:
                if name not in content:
                    problems.setdefault(name, "Required.")
        elif not path and error.validator == "additionalProperties":
            extra = ", ".join(sorted(str(k) for k in content if k not in properties))
            problems.setdefault("", f"The answer has fields the form does not ask for: {extra}.")
        else:
            problems.setdefault(str(path[0]) if path else "", _say(error))
    return problems


def describe_problems(schema: Any, problems: dict[str, str]) -> str:
    """The problems in one line, each named by its field's title ("Moons: choose at least 1.")."""
    parts = []
    for name, said in problems.items():
        parts.append(said if not name else f"{title_of(schema, name)}: {said[:1].lower()}{said[1:]}")
    return " ".join(parts)
