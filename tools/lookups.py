"""Who may see and change what, as queries and lookups the web layer shares (views, API, consumers).

Kept apart so views, the API, the server log and the sockets ask the same question the same way
instead of importing each other.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from tools.models import Server, ToolCall


def visible_server(request: HttpRequest, pk: int) -> Server:
    """A server the user may see; someone else's private server is a 404, not a 403."""
    return get_object_or_404(Server.objects.visible_to(request.user).select_related("owner"), pk=pk)


def editable_server(request: HttpRequest, pk: int, doing: str = "edit") -> Server:
    """A server the user may change (Server.check_editable_by): 404 if unseen, 403 if not theirs or stdio for non-staff."""
    server = visible_server(request, pk)
    server.check_editable_by(request.user, doing)
    return server


def own_calls(request: HttpRequest):
    """Calls the user may act on (cancel, answer for): those they made and those of their callers (conversations)."""
    return ToolCall.objects.acted_on_by(request.user)


def log_servers(user):
    """Servers whose JSON-RPC frames `user` may read: their own (frames carry every user's
    arguments and results, so a shared server's log stays with its owner), or all for superusers."""
    return Server.objects.all() if user.is_superuser else Server.objects.filter(owner=user)


def reads_log(user, server: Server) -> bool:
    """The owner and superusers read a server's log (the JSON-RPC log's rule, tools/views.py log_servers)."""
    return user.is_superuser or server.owner_id == user.pk
