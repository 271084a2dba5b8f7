"""Resource subscriptions from a resource page (issue 28.3): Subscribe and Unsubscribe.

A subscription is a row (ResourceSubscription) first; a worker's connection to the server then
subscribes to what the rows hold (tools/runtime/remote.py `_settle`: `resources/subscribe` on 2025-11-25,
`subscriptions/listen` on 2026-07-28), and every worker's connection catches up at its next use.
Updates reach the page over the server's socket (`resource.updated`, /ws/servers/{id}/).
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from pydantic import Field

from inspector.api import ApiError, Body, api_view, parse_body
from inspector.errors import Problem
from tools.lookups import visible_server
from tools.models import ResourceSubscription, Server
from tools.runtime import lifecycle


class SubscriptionBody(Body):
    uri: str = Field(min_length=1, max_length=2000)


def offers_subscriptions(server: Server) -> bool:
    """Whether the server said it takes resource subscriptions; unknown before it ever connected."""
    if not (server.protocol_version or server.last_connected_at):
        return True
    return bool(((server.capabilities or {}).get("resources") or {}).get("subscribe"))


def how(server: Server) -> str:
    """The request that carries a subscription on this server's protocol."""
    return "subscriptions/listen" if server.protocol_version >= "2026" else "resources/subscribe"


def _connection_state(request: HttpRequest, server: Server) -> dict:
    return lifecycle.ask_worker(server.pk, "subscriptions", {}, request.user.pk, "the subscription")


@api_view("GET", "POST", "DELETE")
def subscriptions(request: HttpRequest, pk: int) -> JsonResponse:
    """GET: the user's subscriptions to the server. POST {uri}: subscribe (answers once the
    server took it, or says why not). DELETE {uri}: unsubscribe."""
    server = visible_server(request, pk)
    mine = ResourceSubscription.objects.filter(server=server, user=request.user)
    if request.method == "GET":
        return JsonResponse({"subscriptions": [{"uri": s.uri, "since": s.created_at.isoformat()} for s in mine]})
    uri = parse_body(request, SubscriptionBody).uri
    if request.method == "DELETE":
        mine.filter(uri=uri).delete()
        try:
            _connection_state(request, server)  # best effort: a connection that missed it stops at its next use
        except Problem:
            pass
        return JsonResponse({"uri": uri, "subscribed": False})
    if not offers_subscriptions(server):
        raise ApiError(f"{server.name} does not offer resource subscriptions (its capabilities have no resources.subscribe).",
                       status=409)
    row, created = ResourceSubscription.objects.get_or_create(server=server, user=request.user, uri=uri)
    try:
        answer = _connection_state(request, server)
    except Problem:
        if created:
            row.delete()
        raise
    if not answer.get("ok") or uri not in answer.get("subscribed", []):
        if created:
            row.delete()
        why = answer.get("error") or (answer.get("errors") or {}).get(uri) or "the connection did not subscribe"
        raise ApiError(f"Not subscribed: {why}", status=502)
    server.refresh_from_db(fields=["protocol_version"])
    return JsonResponse({"uri": uri, "subscribed": True, "since": row.created_at.isoformat(), "via": how(server)})
