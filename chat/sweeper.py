"""The periodic sweep, run by every worker process: no call and no turn is left hanging.

Each worker starts a daemon thread when it is ready (chat/tasks.py). Every SWEEP_INTERVAL
seconds it (never two workers at once: a Redis lock) ends or re-sends tool calls past their
deadline (tools/runtime/sweep.py) and resumes or closes turns that stopped making progress
(chat/tasks.py close_stale_turns, handed to `start`). It lives in the workers, so `make run`, the tests and a
scaled-out deployment get it without another process to run; it lives in `chat` because it
sweeps both apps and dependencies run chat -> tools.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import close_old_connections

from chat.live import resume_stalled_live_runs
from chat.replay import resume_stalled_runs
from tools.runtime.sweep import sweep_calls

log = logging.getLogger(__name__)

_started = threading.Event()
# Sweeps other apps add (evals/tasks.py), so chat never imports the apps built on it.
_registered: list[tuple[str, Callable[[], object]]] = []


def register(name: str, fn: Callable[[], object]) -> None:
    """Add an idempotent sweep `fn` to every pass (once per name)."""
    if all(n != name for n, _ in _registered):
        _registered.append((name, fn))


def sweep_once(close_stale_turns: Callable[[], int]) -> None:
    """One pass of both sweeps (each failure logged, never raised: the worker must keep running).
    `close_stale_turns` is chat/tasks.py's (it resumes a turn by sending its step)."""
    for name, fn in (("tool calls", sweep_calls), ("turns", close_stale_turns), ("replay runs", resume_stalled_runs),
                     ("live replay runs", resume_stalled_live_runs), *_registered):
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


def _run(close_stale_turns: Callable[[], int]) -> None:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5, socket_connect_timeout=5)
    while True:
        try:
            # redis-py's Lock holds a token, so a holder whose lock expired never frees another's.
            lock = client.lock(lock_key(), timeout=lock_ttl(), blocking=False)
            if lock.acquire():
                try:
                    sweep_once(close_stale_turns)
                finally:
                    try:
                        lock.release()
                    except redis.exceptions.LockError:
                        log.warning("sweep took longer than its lock (%.0f s); another worker may have swept too", lock_ttl())
        except redis.RedisError as exc:
            log.warning("sweep skipped: Redis is unavailable (%s)", exc)
        time.sleep(settings.SWEEP_INTERVAL)


def start(close_stale_turns: Callable[[], int]) -> None:
    """Start this process's sweeper thread once."""
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=_run, args=(close_stale_turns,), name="sweeper", daemon=True).start()
