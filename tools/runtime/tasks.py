"""Celery tasks of the tools app. All MCP traffic happens here, in workers, never in the web process."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_init
from django.conf import settings
from django.utils import timezone

from inspector import logs
from tools.mcp import tokens
from tools.mcp.cache_hints import CacheHint, Listing
from tools.mcp.errors import RemoteError
from tools.mcp.url_secrets import redact
from tools.models import OAuthFlow, Server, ToolCall
from tools.runtime import oauth, pipeline, remote, result_cache

log = logging.getLogger(__name__)


# How often a chat step's task looks at a call that waits for input or runs in another delivery.
CHORD_POLL = 1.0


@worker_init.connect
def warm_up_token_counting(**kwargs) -> None:
    """Import litellm and load its tokenizer before the worker takes any task.

    Every tool call counts tokens with litellm (tools/mcp/tokens.py), and the first count in a process
    costs ~3.8 s of CPU (the import, then the tokenizer). Loaded in a background thread once the
    worker was ready, it competed with the first calls for the GIL: a replacement worker's first
    calls overran short leases and were run again (CI: attempts 3 where 2 were right). So the
    worker pays it before it answers pings; daphne and the other processes still never import it.
    """
    tokens.count("warm-up")


@shared_task(name="tools.tasks.execute_tool_call", bind=True, max_retries=None)
def execute_tool_call(self, tool_call_id: str) -> str:
    """Run the call (tools/runtime/pipeline.py). A chat step waits on its calls' tasks (a chord), so there
    the task returns only once the call has ended: while another delivery runs it, or while it
    rests waiting for input (tools/runtime/input_rounds.py), the task retries (no worker waits)."""
    try:
        with logs.context(call_id=tool_call_id):
            status = pipeline.execute(tool_call_id)
    except pipeline.CallInProgress as busy:
        raise self.retry(countdown=CHORD_POLL if self.request.chord else busy.retry_in) from None
    except pipeline.CallResting:
        status = ToolCall.Status.INPUT_REQUIRED
    if status == ToolCall.Status.INPUT_REQUIRED and self.request.chord:
        raise self.retry(countdown=CHORD_POLL)
    return status


def _error(exc: Exception) -> dict[str, Any]:
    # `refused`: the server answered with a JSON-RPC error (the request was wrong, not the server).
    return {"ok": False, "error": redact(str(exc)) or exc.__class__.__name__, "refused": isinstance(exc, RemoteError)}


@shared_task(name="tools.tasks.server_action", acks_late=False)
def server_action(server_id: int, action: str, params: dict[str, Any] | None = None, user_id: int | None = None) -> dict[str, Any]:
    """Inspector requests (refresh, resources, prompts), answered as JSON-able dicts. `user_id`:
    who asked (an OAuth server is asked with their own sign-in, tools/runtime/oauth.py).

    Errors come back as {"ok": False, "error": ...} so the page can show them; they are not
    retried (acks_late off): a person is waiting and can press the button again.
    """
    params = params or {}
    try:
        server = Server.objects.get(pk=server_id)
    except Server.DoesNotExist:
        return {"ok": False, "error": "This server no longer exists."}
    try:
        force = bool(params.get("force", True))  # False: a result the server said is still fresh is reused
        if action == "refresh":
            info = remote.sync_tools(server, reconnect=params.get("reconnect", True), user_id=user_id, force=force)
            return {"ok": True, **{k: v for k, v in info.items() if k != "tools"}, "tool_count": len(info["tools"])}
        if action == "resources":
            return {"ok": True, **_resources(server, user_id, force)}
        if action == "read_resource":
            uri = params["uri"]
            if not force and (kept := result_cache.fresh(server, "resources/read", user_id, uri)) is not None:
                return {"ok": True, "result": kept.result, **result_cache.note(kept)}
            result = remote.run(server, lambda conn: conn.read_resource(uri), user_id=user_id)
            result_cache.keep(server, "resources/read", CacheHint.of(result), result, user_id, uri)
            return {"ok": True, "result": result}
        if action == "prompts":
            if not force and (kept := result_cache.fresh(server, "prompts/list", user_id)) is not None:
                return {"ok": True, "prompts": kept.result["prompts"], **result_cache.note(kept)}
            listed = remote.run(server, lambda conn: conn.listing("prompts/list"), user_id=user_id)
            result_cache.keep(server, "prompts/list", listed.hint, {"prompts": listed.items}, user_id)
            return {"ok": True, "prompts": listed.items}
        if action == "get_prompt":
            return {"ok": True, "result": remote.run(server, lambda conn: conn.get_prompt(params["name"], params.get("arguments") or {}), user_id=user_id)}
        if action == "complete":
            result = remote.run(server, lambda conn: conn.complete(params["ref"], params["argument"], params["value"],
                                                                   params.get("context"), timeout=settings.COMPLETION_TIMEOUT),
                                user_id=user_id)
            return {"ok": True, "result": result}
        if action == "subscriptions":
            # The wrapper in remote.run brought the connection to the subscriptions users hold.
            async def state(conn):
                return {"offered": conn.subscriptions.offered, "subscribed": sorted(conn.subscriptions.subscribed),
                        "errors": dict(conn.subscriptions.errors), "protocol_version": conn.protocol_version}

            return {"ok": True, **remote.run(server, state, user_id=user_id)}
        if action == "set_log_level":
            level = params.get("level") or None
            applied = remote.run(server, lambda conn: conn.logging.set(level), user_id=user_id)
            # The row too: other workers' connections catch up at their next use (remote.run).
            Server.objects.filter(pk=server.pk).update(log_level=level or "")
            return {"ok": True, "applied": applied, "level": level or ""}
        return {"ok": False, "error": f"Unknown action {action!r}."}
    except Exception as exc:  # noqa: BLE001 - shown to the person who asked
        return _error(exc)


def _resources(server: Server, user_id: int | None, force: bool) -> dict[str, Any]:
    """The resources and templates lists, from what was kept while both are fresh (unless `force`)."""
    if not force and (kept := result_cache.fresh(server, "resources/list", user_id)) is not None:
        return {**kept.result, **result_cache.note(kept)}

    async def fn(conn):
        resources = await conn.listing("resources/list")
        try:
            templates = await conn.listing("resources/templates/list")
        except Exception:  # noqa: BLE001 - a server may support resources but not templates
            templates = Listing([], resources.hint)
        return resources, templates

    resources, templates = remote.run(server, fn, user_id=user_id)
    answer = {"resources": resources.items, "templates": templates.items}
    result_cache.keep(server, "resources/list", resources.hint.combine(templates.hint), answer, user_id)
    return answer


@shared_task(name="tools.tasks.oauth_start", acks_late=False)
def oauth_start(server_id: int, user_id: int, redirect_uri: str) -> dict[str, Any]:
    """Begin a user's sign-in to an OAuth server (tools/runtime/oauth.py): the authorization URL, or why not."""
    server = Server.objects.filter(pk=server_id).first()
    if server is None:
        return {"ok": False, "error": "This server no longer exists."}
    try:
        flow = oauth.start(server, user_id, redirect_uri)
    except Exception as exc:  # noqa: BLE001 - shown to the person who pressed Sign in
        log.exception("OAuth sign-in to server %s could not start", server_id)
        return {"ok": False, "error": f"The sign-in could not start: {redact(str(exc)) or exc.__class__.__name__}"}
    if flow.status == flow.Status.FAILED:
        return {"ok": False, "error": flow.error, "flow_id": str(flow.pk)}
    return {"ok": True, "flow_id": str(flow.pk), "authorization_url": flow.authorization_url}


@shared_task(name="tools.tasks.oauth_finish", acks_late=False)
def oauth_finish(flow_id: str, code: str, iss: str | None = None) -> dict[str, Any]:
    """Swap the code the authorization server sent back for the user's tokens."""
    # Claimed once (a reload of the callback page must not spend the code twice).
    claimed = OAuthFlow.objects.filter(pk=flow_id, status=OAuthFlow.Status.WAITING, finished_at__isnull=True).update(
        finished_at=timezone.now())
    flow = OAuthFlow.objects.select_related("server", "user").filter(pk=flow_id).first()
    if not claimed or flow is None:
        return {"ok": False, "error": "This sign-in is over (finished, failed or unknown); start again."}
    try:
        flow = oauth.finish(flow, code, iss)
    except Exception as exc:  # noqa: BLE001 - shown to the person who signed in
        log.exception("OAuth sign-in %s could not finish", flow_id)
        why = f"The sign-in could not finish: {redact(str(exc)) or exc.__class__.__name__}"
        OAuthFlow.objects.filter(pk=flow_id).update(status=OAuthFlow.Status.FAILED, error=why, code_verifier="")
        return {"ok": False, "error": why}
    if flow.status == flow.Status.FAILED:
        return {"ok": False, "error": flow.error, "flow_id": str(flow.pk)}
    # The server answers now: list its tools with the new sign-in.
    try:
        remote.sync_tools(flow.server, reconnect=True, user_id=flow.user_id)
    except Exception as exc:  # noqa: BLE001 - signed in all the same; the page shows the refresh error
        return {"ok": True, "flow_id": str(flow.pk), "refresh_error": _error(exc)["error"]}
    return {"ok": True, "flow_id": str(flow.pk)}
