"""Celery tasks of the chat app (queue `llm`)."""

from celery import shared_task

from chat import agent


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
