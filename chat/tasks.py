"""Celery tasks of the chat app (queue `llm`), and the scheduling of a turn's steps.

chat/agent.py stores what a step did and says what runs next (a `StepOutcome`); this module
turns that into Celery work: the step's tool calls as a group and, once all have ended, the
next step (a chord). Views and the sweep start and resume turns through here.
"""

from __future__ import annotations

import time

from celery import chord, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction

from chat import agent
from chat.models import Conversation, Turn
from inspector import logs
from tools.runtime.tasks import execute_tool_call


@shared_task(name="chat.tasks.llm_step", bind=True, max_retries=None)
def llm_step(self, turn_id: int, step: int | None = None) -> str:
    try:
        with logs.context(turn_id=turn_id):
            outcome = agent.run_step(turn_id, step)
    except agent.StepInProgress:
        raise self.retry(countdown=5) from None
    if outcome.tool_calls and settings.FAULT_PAUSE_BEFORE_CHORD:
        time.sleep(settings.FAULT_PAUSE_BEFORE_CHORD)  # a fault test's window: the step is stored, no chord yet
    schedule(outcome)
    return outcome.result


@shared_task(name="chat.tasks.fail_turn")
def fail_turn(turn_id: int, *args, **kwargs) -> str:
    """Errback of a turn's steps: an unexpected failure ends the turn instead of leaving it running."""
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is not None:
        agent.finish_turn(turn, Turn.Status.FAILED, error="The turn stopped on an internal error; see the worker log.")
    return "failed"


def _step(turn_id: int, step: int):
    return llm_step.si(turn_id, step).on_error(fail_turn.si(turn_id))


def queue_step(turn_id: int, step: int) -> None:
    """Send one step of a turn to the workers."""
    _step(turn_id, step).delay()


def schedule(outcome: agent.StepOutcome) -> None:
    """Run what a step asked for: its tool calls in parallel, then the next step."""
    if outcome.next_step is None or outcome.turn_id is None:
        return
    next_step = _step(outcome.turn_id, outcome.next_step)
    if outcome.tool_calls:
        # Each call's task id was stored on its row (the sweep re-sends a lost one under it).
        chord([execute_tool_call.si(call_id).set(task_id=task_id) for call_id, task_id in outcome.tool_calls])(next_step)
    else:
        next_step.delay()  # every requested tool was unknown: the model reads why at once


def begin_turn(conversation: Conversation, text: str, from_view=None) -> Turn:
    """Store the user's message (or an App view's, `from_view`) as a new turn and send its first step."""
    turn = agent.start_turn(conversation, text, from_view=from_view)
    transaction.on_commit(lambda: queue_step(turn.pk, 1))  # at once unless a caller holds a transaction
    return turn


def check_turn(turn: Turn) -> bool:
    """Resume a turn whose step was lost, or close one that stopped making progress; True if it ended."""
    found = agent.close_if_stale(turn)
    if found.resume_step is not None:
        queue_step(turn.pk, found.resume_step)
    return found.ended


def close_stale_turns() -> int:
    """Resume or close every running turn that has stopped making progress; return how many ended."""
    return sum(check_turn(turn) for turn in Turn.objects.filter(status=Turn.Status.RUNNING))


@worker_ready.connect
def start_sweeping(**kwargs) -> None:
    """A worker that starts may be replacing one that died mid-turn: sweep now, then every
    SWEEP_INTERVAL seconds (chat/sweeper.py)."""
    from chat import sweeper

    sweeper.start()


@shared_task(name="chat.tasks.replay_advance")
def replay_advance(run_id: int) -> str:
    """The next step of a recorded replay: compare what ended, start the next call (chat/replay.py)."""
    from chat import replay

    return replay.advance(run_id)


@shared_task(name="chat.tasks.live_advance")
def live_advance(run_id: int) -> str:
    """The next step of a live replay: post the next user message once the last turn ended (chat/live.py)."""
    from chat import live

    return live.advance(run_id)


@shared_task(name="chat.tasks.run_sampling", acks_late=False)
def run_sampling(server_request_id: str) -> str:
    """A server's approved sampling request, run on the model (chat/sampling.py). Not retried:
    a person is waiting and can approve again."""
    from chat import sampling

    return sampling.run(server_request_id)
