"""The periodic sweep, run by every worker process: no call and no turn is left hanging.

Each worker starts a daemon thread when it is ready (chat/tasks.py). Every SWEEP_INTERVAL
seconds it (never two workers at once: a Redis lock) ends or re-sends tool calls past their
deadline (tools/runtime/sweep.py) and resumes or closes turns that stopped making progress
(chat.tasks.close_stale_turns). It lives in the workers, so `make run`, the tests and a
scaled-out deployment get it without another process to run; it lives in `chat` because it
sweeps both apps and dependencies run chat -> tools.
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger(__name__)

_started = threading.Event()


def sweep_once() -> None:
    """One pass of both sweeps (each failure logged, never raised: the worker must keep running)."""
    from chat.live import resume_stalled_live_runs
    from chat.replay import resume_stalled_runs
    from chat.tasks import close_stale_turns
    from tools.runtime.sweep import sweep_calls

    for name, fn in (("tool calls", sweep_calls), ("turns", close_stale_turns), ("replay runs", resume_stalled_runs),
                     ("live replay runs", resume_stalled_live_runs)):
        try:
            fn()
        except Exception:  # noqa: BLE001 - the next pass tries again
            log.exception("sweeping %s failed", name)
        finally:
            close_old_connections()


# One sweep at a time across the workers sharing this Redis (each pass is idempotent, so the
# lock only saves work). It expires by itself, so a worker killed mid-sweep (SIGKILL leaves its
# lock behind) holds the others off for a few intervals at most, not for a fixed minute; a pass
# that outlives its lock only risks a second pass doing the same idempotent work.
def lock_ttl() -> float:
    """Seconds a sweep lock lives: four intervals, at least five seconds."""
    return max(5.0, 4 * settings.SWEEP_INTERVAL)


def lock_key() -> str:
    return f"{settings.REDIS_PREFIX}sweep-lock"


def _run() -> None:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5, socket_connect_timeout=5)
    while True:
        try:
            # redis-py's Lock holds a token, so a holder whose lock expired never frees another's.
            lock = client.lock(lock_key(), timeout=lock_ttl(), blocking=False)
            if lock.acquire():
                try:
                    sweep_once()
                finally:
                    try:
                        lock.release()
                    except redis.exceptions.LockError:
                        log.warning("sweep took longer than its lock (%.0f s); another worker may have swept too", lock_ttl())
        except redis.RedisError as exc:
            log.warning("sweep skipped: Redis is unavailable (%s)", exc)
        time.sleep(settings.SWEEP_INTERVAL)


def start() -> None:
    """Start this process's sweeper thread once."""
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=_run, name="sweeper", daemon=True).start()
