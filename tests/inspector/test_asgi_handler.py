"""Django's HTTP handling under daphne (inspector/asgi_handler.py, the handler inspector/asgi.py
serves): the chain runs in one hop to a thread, threads are kept between requests with their
database connection, and a thread whose request was cancelled mid-chain comes back only after it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.test import override_settings
from django.urls import path

from inspector import asgi
from inspector.asgi_handler import OneHopASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)
entered = threading.Event()


@login_not_required
def where(request):
    """Which thread served the request, and on which database connection."""
    if request.GET.get("sleep"):
        entered.set()
        time.sleep(float(request.GET["sleep"]))
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"thread": threading.get_ident(), "connection": id(connection.connection)})


urlpatterns = [path("where/", where)]


async def get(handler, query: str = "", disconnect_after: float | None = None) -> dict | None:
    """One GET /where/ through the handler as daphne makes it; None when the client went away."""
    incoming: asyncio.Queue = asyncio.Queue()
    incoming.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": "/where/", "raw_path": b"/where/", "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    if disconnect_after is not None:
        asyncio.get_running_loop().call_later(disconnect_after, incoming.put_nowait, {"type": "http.disconnect"})
    await handler(scope, incoming.get, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return json.loads(body) if body else None


@override_settings(ROOT_URLCONF=__name__)
def test_the_served_handler_runs_the_chain_in_one_hop_on_kept_threads():
    assert isinstance(asgi.django_asgi_app, OneHopASGIHandler)
    handler = OneHopASGIHandler(keep_threads=2)
    # The chain is the sync one WSGI runs: one hop to a thread for all of it, not one per middleware.
    assert not asyncio.iscoroutinefunction(handler._middleware_chain)

    first, second = async_to_sync(get)(handler), async_to_sync(get)(handler)
    assert first["thread"] == second["thread"] != threading.get_ident()
    if connection.vendor == "sqlite":  # PostgreSQL's connection goes back to the process's pool
        assert first["connection"] == second["connection"]

    async def two_at_once():
        return await asyncio.gather(get(handler, "sleep=0.2"), get(handler, "sleep=0.2"))

    both = async_to_sync(two_at_once)()
    assert both[0]["thread"] != both[1]["thread"]  # one request per thread at a time
    assert first["thread"] in {both[0]["thread"], both[1]["thread"]}
    assert len(handler.threads.idle) == 2


@override_settings(ROOT_URLCONF=__name__)
def test_a_request_whose_client_went_away_holds_up_no_later_request():
    handler = OneHopASGIHandler(keep_threads=4)
    async_to_sync(get)(handler)
    entered.clear()
    # The client goes away while the view sleeps: Django cancels the request on the event loop,
    # its chain runs on in the thread, and the thread comes back only when the chain has ended.
    started = time.monotonic()
    assert async_to_sync(get)(handler, "sleep=0.5", disconnect_after=0.1) is None
    assert entered.is_set() and time.monotonic() - started >= 0.45
    started = time.monotonic()
    async_to_sync(get)(handler)
    assert time.monotonic() - started < 0.3, "the next request waited behind the cancelled one"


@override_settings(ROOT_URLCONF=__name__)
def test_a_thread_still_running_a_request_daphne_cancelled_is_not_lent_again():
    """daphne cancels a request whose client left --application-close-timeout before, whatever its
    view is doing (a `?wait=` may wait minutes): that thread must not serve the next request."""
    handler = OneHopASGIHandler(keep_threads=4)
    kept = async_to_sync(get)(handler)["thread"]
    entered.clear()

    async def cancelled_by_daphne() -> None:
        request = asyncio.ensure_future(get(handler, "sleep=1.0", disconnect_after=0.05))
        await asyncio.sleep(0.3)  # the client has left; daphne's application checker cancels it
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request

    async_to_sync(cancelled_by_daphne)()
    assert entered.is_set() and handler.threads.idle == []
    started = time.monotonic()
    after = async_to_sync(get)(handler)
    assert time.monotonic() - started < 0.3, "the next request waited behind the cancelled one"
    assert after["thread"] != kept
