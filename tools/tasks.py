"""Celery tasks of the tools app. All MCP traffic happens here, in workers, never in the web process."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from tools import pipeline
from tools.models import Server, ToolCall
from tools.url_secrets import redact


# How often a chat step's task looks at a call that waits for input or runs in another delivery.
CHORD_POLL = 1.0


@shared_task(name="tools.tasks.execute_tool_call", bind=True, max_retries=None)
def execute_tool_call(self, tool_call_id: str) -> str:
    """Run the call (tools/pipeline.py). A chat step waits on its calls' tasks (a chord), so there
    the task returns only once the call has ended: while another delivery runs it, or while it
    rests waiting for input (tools/input_rounds.py), the task retries (no worker waits)."""
    try:
        status = pipeline.execute(tool_call_id)
    except pipeline.CallInProgress as busy:
        raise self.retry(countdown=CHORD_POLL if self.request.chord else busy.retry_in) from None
    except pipeline.CallResting:
        status = ToolCall.Status.INPUT_REQUIRED
    if status == ToolCall.Status.INPUT_REQUIRED and self.request.chord:
        raise self.retry(countdown=CHORD_POLL)
    return status


def _error(exc: Exception) -> dict[str, Any]:
    from tools.connection import RemoteError

    # `refused`: the server answered with a JSON-RPC error (the request was wrong, not the server).
    return {"ok": False, "error": redact(str(exc)) or exc.__class__.__name__, "refused": isinstance(exc, RemoteError)}


@shared_task(name="tools.tasks.server_action", acks_late=False)
def server_action(server_id: int, action: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Inspector requests (refresh, resources, prompts), answered as JSON-able dicts.

    Errors come back as {"ok": False, "error": ...} so the page can show them; they are not
    retried (acks_late off): a person is waiting and can press the button again.
    """
    from tools import remote

    params = params or {}
    try:
        server = Server.objects.get(pk=server_id)
    except Server.DoesNotExist:
        return {"ok": False, "error": "This server no longer exists."}
    try:
        if action == "refresh":
            info = remote.sync_tools(server, reconnect=params.get("reconnect", True))
            return {"ok": True, **{k: v for k, v in info.items() if k != "tools"}, "tool_count": len(info["tools"])}
        if action == "resources":
            async def fn(conn):
                resources = await conn.list_resources()
                try:
                    templates = await conn.list_resource_templates()
                except Exception:  # noqa: BLE001 - a server may support resources but not templates
                    templates = []
                return {"resources": resources, "templates": templates}

            return {"ok": True, **remote.run(server, fn)}
        if action == "read_resource":
            return {"ok": True, "result": remote.run(server, lambda conn: conn.read_resource(params["uri"]))}
        if action == "prompts":
            return {"ok": True, "prompts": remote.run(server, lambda conn: conn.list_prompts())}
        if action == "get_prompt":
            return {"ok": True, "result": remote.run(server, lambda conn: conn.get_prompt(params["name"], params.get("arguments") or {}))}
        if action == "complete":
            result = remote.run(server, lambda conn: conn.complete(params["ref"], params["argument"], params["value"],
                                                                   params.get("context"), timeout=settings.COMPLETION_TIMEOUT))
            return {"ok": True, "result": result}
        return {"ok": False, "error": f"Unknown action {action!r}."}
    except Exception as exc:  # noqa: BLE001 - shown to the person who asked
        return _error(exc)
