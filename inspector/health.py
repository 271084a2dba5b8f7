"""Liveness checks for /healthz: database, Redis and Celery workers."""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.db import connection


def check_database() -> dict:
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means "down"; the message says why
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "vendor": connection.vendor, "ms": round((time.monotonic() - started) * 1000, 1)}


def check_redis() -> dict:
    started = time.monotonic()
    try:
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2, socket_connect_timeout=2)
        client.ping()
        client.close()
    except Exception as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}


def check_workers(timeout: float = 1.5, hostname: str | None = None, limit: int | None = None) -> dict:
    """A Celery ping: it is answered by the worker's consumer loop, so an answer means the worker
    is connected and taking messages, not only that its process is alive.

    Without `limit` the ping waits its whole timeout for every worker's answer; with `limit=1` it
    returns at the first (a few ms), which is all a health probe needs."""
    from inspector.celery import app

    try:
        if hostname:
            from celery.utils.nodenames import host_format

            hostname = host_format(hostname)  # "worker-1@%h", as the unit file names it
            replies = app.control.ping(destination=[hostname], timeout=timeout, limit=1)
        else:
            replies = app.control.ping(timeout=timeout, limit=limit)
    except Exception as exc:
        return {"ok": False, "error": str(exc), "workers": []}
    names = sorted(name for reply in replies for name in reply)
    if not names:
        return {"ok": False, "error": "No Celery worker answered a ping.", "workers": []}
    return {"ok": True, "workers": names}


def report(role: str = "all", every_worker: bool = False) -> tuple[bool, dict]:
    """The app's health; `role="web"` is one web process's own (database and Redis, no worker
    ping), for a proxy's health check that must not fail every web process when workers are down.

    The worker check stops at the first answer (a probe does not hold daphne's thread for the
    ping's 1.5 s); `every_worker` waits for all of them, to name them (staff)."""
    checks = {"database": check_database(), "redis": check_redis()}
    if role != "web":
        # Without Redis a worker ping would only hang until its timeout.
        checks["worker"] = (check_workers(limit=None if every_worker else 1) if checks["redis"]["ok"]
                            else {"ok": False, "error": "Redis is down."})
    healthy = all(c["ok"] for c in checks.values())
    return healthy, {"status": "ok" if healthy else "degraded", "checks": checks}


def worker_report(hostname: str | None = None) -> tuple[bool, dict]:
    """The worker role's health: the named worker (or any) answers a ping."""
    checks = {"redis": check_redis()}
    checks["worker"] = (check_workers(timeout=3.0, hostname=hostname) if checks["redis"]["ok"]
                        else {"ok": False, "error": "Redis is down."})
    healthy = all(c["ok"] for c in checks.values())
    return healthy, {"status": "ok" if healthy else "degraded", "checks": checks}


def summary(body: dict) -> dict:
    """The report without error texts and worker names (which name hosts, ports and databases)."""
    checks = {}
    for name, check in body["checks"].items():
        checks[name] = {"ok": check["ok"]}
        if "workers" in check:
            checks[name]["workers"] = len(check["workers"])
    return {"status": body["status"], "checks": checks}
