"""The review's summary on pages of other apps (the server page) without their views importing review."""

from django import template

from review import drift

register = template.Library()


@register.inclusion_tag("review/_server_summary.html")
def review_summary(server) -> dict:
    return {"server": server, "state": drift.state(server)}
