"""A "live" replay: the recorded user messages sent again to a chosen model as a new conversation,
then its tool-call trajectory and final answers compared with the original's.

Why: "would another model (or a new prompt, or today's tools) make the same calls?" The new
conversation is an ordinary one, run by the ordinary agent loop (chat.tasks.begin_turn): one
user message per turn, the next only once the last turn ended. Nothing waits inside a worker:
`advance()` posts a message or, while a turn runs, looks again a second later as a new task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery import signature
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat import agent, jsondiff, settings_schema
from chat.models import Conversation, Message, ReplayRun, Turn
from chat.replay import ReplayError
from chat.tool_calls import calls_of, turn_id_of
from tools.models import Server, ToolCall

log = logging.getLogger(__name__)

ADVANCE = "chat.tasks.live_advance"  # sent by name: chat/tasks.py defines it and imports this module

POLL_SECONDS = 1.0
STALL_SECONDS = 60


def user_messages(conversation: Conversation) -> list[str]:
    return list(conversation.messages.filter(role=Message.Role.USER).order_by("seq").values_list("text", flat=True))


def start_live(conversation: Conversation, user, *, model: Any, api_base: Any = "", api_key: Any = "",
               server_ids: Any = None, ignore_paths: Any = None) -> ReplayRun:
    """Create the new conversation and the run; the first message goes once this commits."""
    if not isinstance(model, str) or not model.strip():
        raise ReplayError("`model` is required for a live replay: a litellm model name such as openai/gpt-4o-mini.")
    if api_base and (not isinstance(api_base, str) or not api_base.startswith(("http://", "https://"))):
        raise ReplayError("`api_base` must be an http:// or https:// URL.")
    if api_key is not None and not isinstance(api_key, str):
        raise ReplayError("`api_key` must be a string.")
    try:
        ignore = jsondiff.validate_patterns(ignore_paths)
    except jsondiff.PatternError as exc:
        raise ReplayError(str(exc)) from None
    texts = user_messages(conversation)
    if not texts:
        raise ReplayError("The conversation has no user message to send again.")
    if server_ids is None:
        # The servers the conversation used, matched by name when they are not there (an import).
        names = {c.server_name for c in calls_of(conversation)} | {
            s.name for s in conversation.servers.all()}
        visible = Server.objects.visible_to(user).filter(enabled=True)
        servers = []
        for name in sorted(names):
            match = sorted(visible.filter(name=name), key=lambda s: (s.owner_id != user.pk, s.pk))
            if match:
                servers.append(match[0])
    else:
        if not isinstance(server_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in server_ids):
            raise ReplayError("`server_ids` must be a list of server ids.")
        if len(server_ids) > settings_schema.SERVERS_MAX:
            raise ReplayError(f"`server_ids` may name at most {settings_schema.SERVERS_MAX} servers.")
        servers = list(Server.objects.visible_to(user).filter(pk__in=server_ids))
        missing = sorted(set(server_ids) - {s.pk for s in servers})
        if missing:
            raise ReplayError(f"Unknown server id(s): {missing}.", status=404)
    if not api_key and (api_base or "") == conversation.api_base and conversation.api_key and conversation.owner_id == user.pk:
        api_key = conversation.api_key  # the same endpoint: the original's key (server side only, never shown)
    with transaction.atomic():
        new = Conversation.objects.create(
            owner=user, title=f"Live replay of “{conversation.title or conversation.pk}”"[:200], model=model.strip(),
            api_base=api_base or "", api_key=api_key or "", system_prompt=conversation.system_prompt,
            temperature=conversation.temperature,
        )
        new.servers.set(servers)
        run = ReplayRun.objects.create(
            conversation=conversation, created_by=user, kind=ReplayRun.Kind.LIVE, live_conversation=new,
            ignore_paths=ignore, server_map={s.name: s.pk for s in servers},
            summary={"turns_total": len(texts), "turns_sent": 0, "model": new.model},
        )
        transaction.on_commit(lambda: _send(run.pk))
    return run


def _send(run_id: int, countdown: float | None = None) -> None:
    try:
        signature(ADVANCE, args=(run_id,)).apply_async(countdown=countdown)
    except Exception as exc:  # noqa: BLE001 - the sweep sends it again
        log.warning("could not send live_advance for run %s (%s)", run_id, exc)


def advance(run_id: int, begin_turn: Callable[[Conversation, str], Turn]) -> str:
    """Post the next user message once the previous turn ended (`begin_turn`: chat/tasks.py's, which
    sends its first step); compare at the end."""
    with transaction.atomic():
        # of=self: PostgreSQL cannot lock the nullable side of the outer join to live_conversation.
        run = ReplayRun.objects.select_for_update(of=("self",)).filter(pk=run_id).select_related("live_conversation", "conversation").first()
        if run is None or run.status != ReplayRun.Status.RUNNING or run.kind != ReplayRun.Kind.LIVE:
            return "not running"
        new = run.live_conversation
        if new is None:
            _fail(run, "The live conversation was deleted.")
            return "failed"
        now = timezone.now()
        ReplayRun.objects.filter(pk=run.pk).update(updated_at=now)
        running = new.turns.filter(status=Turn.Status.RUNNING).order_by("-created_at").first()
        if running is not None:
            if now - running.created_at > timedelta(seconds=settings.REPLAY_LIVE_TURN_TIMEOUT):
                transaction.on_commit(lambda: agent.stop_turn(running))
                _fail(run, f"A turn did not end within {settings.REPLAY_LIVE_TURN_TIMEOUT:g} s (REPLAY_LIVE_TURN_TIMEOUT); it was stopped.")
                return "failed"
            transaction.on_commit(lambda: _send(run.pk, POLL_SECONDS))
            return "waiting"
        texts = user_messages(run.conversation)
        sent = new.messages.filter(role=Message.Role.USER).count()
        if sent < len(texts):
            begin_turn(new, texts[sent])
            ReplayRun.objects.filter(pk=run.pk).update(summary={**run.summary, "turns_sent": sent + 1})
            transaction.on_commit(lambda: _send(run.pk, POLL_SECONDS))
            return "sent"
        comparison = compare(trajectory(run.conversation), trajectory(new), jsondiff.Ignore(run.ignore_paths))
        verdict = ReplayRun.Verdict.SAME if comparison["trajectory_same"] else ReplayRun.Verdict.DIFFERENT
        failed_turns = new.turns.filter(status=Turn.Status.FAILED).count()
        if failed_turns:
            verdict = ReplayRun.Verdict.ERROR
        ReplayRun.objects.filter(pk=run.pk).update(
            status=ReplayRun.Status.COMPLETED, verdict=verdict, comparison=comparison, finished_at=now,
            summary={**run.summary, "turns_sent": sent, "turns_same": sum(t["same"] for t in comparison["turns"]),
                     "answers_same": sum(t["answer_same"] for t in comparison["turns"]), "failed_turns": failed_turns},
        )
    return "finished"


def _fail(run: ReplayRun, error: str) -> None:
    ReplayRun.objects.filter(pk=run.pk).update(status=ReplayRun.Status.FAILED, verdict=ReplayRun.Verdict.ERROR, error=error,
                                               finished_at=timezone.now())


def trajectory(conversation: Conversation) -> list[dict[str, Any]]:
    """Per user message: the tool calls the model made (in order) and its final answer."""
    turns: list[dict[str, Any]] = []
    calls_by_turn: dict[int, list[dict[str, Any]]] = {}
    for call in calls_of(conversation).filter(origin=ToolCall.Origin.LLM).order_by("queued_at", "pk"):
        calls_by_turn.setdefault(turn_id_of(call), []).append(
            {"server": call.server_name, "tool": call.tool_name, "arguments": call.arguments, "status": call.status,
             "id": str(call.pk)})
    current = None
    for m in conversation.messages.order_by("seq"):
        if m.role == Message.Role.USER:
            current = {"user": m.text, "turn_id": m.turn_id, "calls": calls_by_turn.get(m.turn_id, []) if m.turn_id else [],
                       "answer": "", "status": None}
            turns.append(current)
        elif m.role == Message.Role.ASSISTANT and current is not None and m.text.strip():
            current["answer"] = m.text
    statuses = dict(Turn.objects.filter(conversation=conversation).values_list("pk", "status"))
    for t in turns:
        t["status"] = statuses.get(t["turn_id"])
    return turns


def compare(original: list[dict[str, Any]], new: list[dict[str, Any]], ignore: jsondiff.Ignore) -> dict[str, Any]:
    """Side by side, turn by turn: the same tools in the same order with the same arguments? the same answer?"""
    out = []
    for i in range(max(len(original), len(new))):
        a = original[i] if i < len(original) else {"user": "", "calls": [], "answer": "", "status": None}
        b = new[i] if i < len(new) else {"user": "", "calls": [], "answer": "", "status": None}
        tools_a, tools_b = [c["tool"] for c in a["calls"]], [c["tool"] for c in b["calls"]]
        argument_diffs = []
        for j in range(min(len(a["calls"]), len(b["calls"]))):
            if a["calls"][j]["tool"] == b["calls"][j]["tool"]:
                d = jsondiff.diff(a["calls"][j]["arguments"], b["calls"][j]["arguments"], ignore)
                argument_diffs.append({"index": j, **d.as_json()})
        tools_same = tools_a == tools_b
        arguments_same = tools_same and all(d["total"] == 0 for d in argument_diffs)
        out.append({
            "index": i, "user": a["user"] or b["user"], "original": a, "replay": b,
            "tools_same": tools_same, "arguments_same": arguments_same, "argument_diffs": argument_diffs,
            "same": tools_same and arguments_same, "answer_same": a["answer"].strip() == b["answer"].strip(),
        })
    return {"turns": out, "trajectory_same": all(t["same"] for t in out), "answers_same": all(t["answer_same"] for t in out)}


def resume_stalled_live_runs() -> int:
    """The sweep's part: a live run that has not moved for a while gets its next step sent again."""
    quiet = timezone.now() - timedelta(seconds=STALL_SECONDS)
    runs = list(ReplayRun.objects.filter(status=ReplayRun.Status.RUNNING, kind=ReplayRun.Kind.LIVE, updated_at__lt=quiet)
                .values_list("pk", flat=True))
    for pk in runs:
        _send(pk)
    return len(runs)
