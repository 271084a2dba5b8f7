"""The Content-Security-Policy of the app's own origin.

Model output is rendered as Markdown in the chat; a prompt-injected answer could otherwise load
an image (or script, frame, form target) from anywhere and carry data out in its URL. The policy
allows only the app itself, `data:` images, the widget sandbox origin in frames and the app's own
WebSocket. The sandbox origin keeps its own, separate policy (inspector.views.sandbox_proxy).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest


def app_policy(request: HttpRequest) -> str:
    """The policy header value for a response to `request` on the app's origin."""
    try:
        host = request.get_host()
        sockets = f" ws://{host} wss://{host}"
    except DisallowedHost:  # a 400 answer: no page, no socket
        sockets = ""
    # CSP_IMG_SRC comes from the environment, split on spaces; a ";" would start a new directive.
    extra = [source for source in settings.CSP_IMG_SRC if ";" not in source]
    image_sources = " ".join(["'self'", "data:", *extra])
    directives = [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        f"img-src {image_sources}",
        # Audio items of tool results play from their base64 data (static/js/rich-content.js).
        "media-src 'self' data:",
        f"connect-src 'self'{sockets}",
        f"frame-src {settings.SANDBOX_ORIGIN}",
        "object-src 'none'",
        "base-uri 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
    return "; ".join(directives)
