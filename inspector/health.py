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


def check_workers(timeout: float = 1.5) -> dict:
    from inspector.celery import app

    try:
        replies = app.control.ping(timeout=timeout)
    except Exception as exc:
        return {"ok": False, "error": str(exc), "workers": []}
    names = sorted(name for reply in replies for name in reply)
    if not names:
        return {"ok": False, "error": "No Celery worker answered a ping.", "workers": []}
    return {"ok": True, "workers": names}


def report() -> tuple[bool, dict]:
    checks = {"database": check_database(), "redis": check_redis()}
    # Without Redis a worker ping would only hang until its timeout.
    checks["worker"] = check_workers() if checks["redis"]["ok"] else {"ok": False, "error": "Redis is down."}
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
