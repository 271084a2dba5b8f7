"""roots/list: answered at once from the server's configured roots, and stored like the rest."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from tools.models import Server, ServerRequest


def respond(server_id: int, live, params: dict) -> dict[str, Any]:
    roots = Server.objects.filter(pk=server_id).values_list("roots", flat=True).first() or []
    ServerRequest.objects.create(
        tool_call_id=live.tool_call_id if live else None, server_id=server_id, kind=ServerRequest.Kind.ROOTS,
        method="roots/list", params=params, status=ServerRequest.Status.ANSWERED, response={"result": {"roots": roots}},
        answered_at=timezone.now(),
    )
    return {"roots": roots}
