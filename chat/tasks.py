"""Celery tasks of the chat app (queue `llm`)."""

import logging

from celery import shared_task
from celery.signals import worker_ready

from chat import agent

log = logging.getLogger(__name__)


@shared_task(name="chat.tasks.llm_step", bind=True, max_retries=None)
def llm_step(self, turn_id: int, step: int | None = None) -> str:
    try:
        return agent.run_step(turn_id, step)
    except agent.StepInProgress:
        raise self.retry(countdown=5) from None


@shared_task(name="chat.tasks.fail_turn")
def fail_turn(turn_id: int, *args, **kwargs) -> str:
    """Errback of a turn's steps: an unexpected failure ends the turn instead of leaving it running."""
    from chat.models import Turn

    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is not None:
        agent.finish_turn(turn, Turn.Status.FAILED, error="The turn stopped on an internal error; see the worker log.")
    return "failed"


@worker_ready.connect
def close_stale_turns_at_start(**kwargs) -> None:
    """A worker that starts may be replacing one that died mid-turn: close what it left running."""
    try:
        closed = agent.close_stale_turns()
    except Exception:  # noqa: BLE001 - a sweep must never keep a worker from starting
        log.exception("could not close stale turns")
        return
    if closed:
        log.warning("closed %d turn(s) that had stopped making progress", closed)
