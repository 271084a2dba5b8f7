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
