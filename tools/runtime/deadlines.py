"""How long a tool call may run: its timeout, its deadline, and the hard maximum.

A call's timeout is fixed when it is created (the caller's override, else its server's
default) and stored on the row (`ToolCall.timeout_s`); blank, the worker's MCP_CALL_TIMEOUT
applies (read in the worker: the setting may be a worker's own). The worker waits that long for an
answer, and each progress notification gives the server that long again, never past the hard
maximum MCP_MAX_CALL_TIMEOUT after the start (the spec lets a client reset its timeout on
progress if it keeps a maximum).

The row's `deadline_at` says until when the delivery running the call holds it: set in the
claim's one UPDATE (started + connect + timeout + margin) and pushed on when progress is stored.
Past it, another delivery may take the call over and the sweep acts. Rows claimed before this
field existed have none and keep the old rule (started + connect + MCP_CALL_TIMEOUT + margin).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q

from tools.models import Server, ToolCall


class TimeoutOutOfRange(ValueError):
    """A timeout below one second or above the hard maximum."""


def max_timeout() -> float:
    """The hard maximum (MCP_MAX_CALL_TIMEOUT): no override above it, no progress past it."""
    return float(settings.MCP_MAX_CALL_TIMEOUT)


def check_timeout(seconds: float) -> float:
    """`seconds` if it is a usable timeout (1 s up to the hard maximum), else TimeoutOutOfRange."""
    if not 1 <= seconds <= max_timeout():
        raise TimeoutOutOfRange(f"A timeout must be between 1 and {max_timeout():g} seconds (MCP_MAX_CALL_TIMEOUT).")
    return float(seconds)


def resolve_timeout(server: Server | None, override: float | None = None) -> float | None:
    """The timeout stored on a new call: the caller's override, else its server's default; None
    leaves it to the MCP_CALL_TIMEOUT of the worker that runs it (a worker's setting, read there)."""
    if override is not None:
        return check_timeout(override)
    if server is not None and server.call_timeout:
        return float(min(server.call_timeout, max_timeout()))
    return None


def shown_timeout(server: Server | None) -> float:
    """The timeout a call on `server` gets without an override, as a page shows it."""
    return resolve_timeout(server) or float(settings.MCP_CALL_TIMEOUT)


def call_timeout(call: ToolCall) -> float:
    """The timeout of a call being run (rows from before timeouts were stored: MCP_CALL_TIMEOUT)."""
    return float(min(call.timeout_s or settings.MCP_CALL_TIMEOUT, max_timeout()))


def legacy_lease() -> timedelta:
    """The lease of a running row without `deadline_at` (claimed before it existed)."""
    return timedelta(seconds=settings.MCP_CONNECT_TIMEOUT + settings.MCP_CALL_TIMEOUT + settings.CALL_LEASE_MARGIN)


def deadline_on_claim(now: datetime, timeout_s: float | None) -> datetime:
    """`deadline_at` for a call claimed at `now`: now + connect + its own timeout (rows without
    one: MCP_CALL_TIMEOUT) + margin."""
    timeout = timeout_s if timeout_s is not None else float(settings.MCP_CALL_TIMEOUT)
    return now + timedelta(seconds=settings.MCP_CONNECT_TIMEOUT + settings.CALL_LEASE_MARGIN + timeout)


def expired(now: datetime) -> Q:
    """Running calls whose holder is presumed gone: past `deadline_at`, or past the legacy lease."""
    return Q(status=ToolCall.Status.RUNNING) & (
        Q(deadline_at__lt=now) | Q(deadline_at__isnull=True, started_at__lt=now - legacy_lease())
    )


def expired_sql(now: datetime) -> tuple[str, list]:
    """`expired(now)` as a SQL condition on the tool call table and its parameters, for the
    worker's claim written as SQL (tools/runtime/pipeline.py): the same rule, kept beside it."""
    q = connection.ops.quote_name
    status, deadline, started = (q(ToolCall._meta.get_field(name).column) for name in ("status", "deadline_at", "started_at"))
    adapt = connection.ops.adapt_datetimefield_value
    return (f"({status} = %s AND ({deadline} < %s OR ({deadline} IS NULL AND {started} < %s)))",
            [ToolCall.Status.RUNNING, adapt(now), adapt(now - legacy_lease())])


def deadline_after_progress(started_at: datetime, now: datetime, timeout: float) -> datetime:
    """Where progress moves the deadline: a timeout from now, never past start + connect +
    hard maximum + margin."""
    margin = settings.CALL_LEASE_MARGIN
    latest = started_at + timedelta(seconds=settings.MCP_CONNECT_TIMEOUT + max_timeout() + margin)
    return min(now + timedelta(seconds=timeout + margin), latest)
