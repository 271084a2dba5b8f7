"""Chat's live events: their type names and the Channels group of a conversation.

Why here: they are chat's, so chat names them (tools/runtime/events.py names the tool-call and server
events, which chat's pages receive too through the group a conversation's calls carry in their
caller context: chat/tool_calls.py).
"""

from __future__ import annotations

from typing import Any

from inspector.events import publish

# /ws/conversations/{id}/
STREAM_SNAPSHOT = "stream.snapshot"
TURN_STARTED = "turn.started"
TURN_COMPLETED = "turn.completed"
TURN_FAILED = "turn.failed"
TURN_STOPPED = "turn.stopped"
MESSAGE_DELTA = "message.delta"
MESSAGE_COMPLETED = "message.completed"
TOOL_CALL_STREAMING = "tool_call.streaming"


def conversation_group(conversation_id: int) -> str:
    """Every live event of one conversation (its owner's chat pages)."""
    return f"conversation.{conversation_id}"


def publish_to_conversation(conversation_id: int, event: dict[str, Any]) -> None:
    publish(conversation_group(conversation_id), event)
