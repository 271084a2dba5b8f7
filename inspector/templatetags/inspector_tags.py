"""Template filters for showing JSON as people read it."""

import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    """Indented JSON (autoescaped by the template like any string)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


@register.filter
def get_item(mapping, key):
    """`mapping[key]`, or "" when absent (for re-filling submitted forms)."""
    return (mapping or {}).get(key, "")


@register.filter
def compact_json(value) -> str:
    """One-line JSON for a diff cell; a stored preview of a long value shows as its text."""
    if isinstance(value, dict) and "$preview" in value:
        return f"{value['$preview']} ({value.get('$chars', '?')} characters)"
    return json.dumps(value, ensure_ascii=False, default=str)


@register.filter
def delta(after, before):
    """`after - before` with a sign, for numbers; "" otherwise."""
    if not isinstance(after, (int, float)) or not isinstance(before, (int, float)):
        return ""
    change = after - before
    if change == 0:
        return "±0"
    text = f"{change:+.1f}" if isinstance(change, float) else f"{change:+d}"
    return text.replace(".0", "") if text.endswith(".0") else text
