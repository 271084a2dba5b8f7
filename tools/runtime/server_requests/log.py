"""notifications/message: a server's log line, in a call or between calls; stored in order per server
and shown on the server's log panel and the call's page."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from inspector.events import publish
from tools.models import LogLevel, ServerLogMessage
from tools.runtime import events

LOG_TEXT_CHARS = 500
locks: dict[int, asyncio.Lock] = {}  # used on the pool's event loop only


def store_log(server_id: int, live, params: dict[str, Any]) -> None:
    level = params.get("level") if params.get("level") in LogLevel.values else LogLevel.INFO
    row = ServerLogMessage.objects.create(
        server_id=server_id, tool_call_id=live.tool_call_id if live else None, level=level,
        logger=str(params.get("logger") or "")[:200], data=params.get("data"),
    )
    # The server's log panel (tools/server_log.py) shows every message, in a call or between calls.
    publish(events.server_group(server_id), {"type": events.SERVER_LOG, "server_id": server_id, "log": log_json(row)})
    if live is None:
        return
    event = {"type": events.TOOL_CALL_LOG, "tool_call_id": live.tool_call_id, "log": log_json(row)}
    for group in live.groups():
        publish(group, event)


def log_json(row: ServerLogMessage) -> dict[str, Any]:
    data = row.data
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return {"id": row.pk, "level": row.level, "logger": row.logger, "text": text[:LOG_TEXT_CHARS],
            "complete": len(text) <= LOG_TEXT_CHARS, "at": row.at.isoformat(),
            "tool_call_id": str(row.tool_call_id) if row.tool_call_id else None}
