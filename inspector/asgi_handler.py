"""Django's HTTP handling under daphne: one thread hop per request, on threads that are kept.

Why not Django's own `ASGIHandler` (measured with bench/hot_path.py; README "Benchmarks"):
- It runs the middleware chain on the event loop, and Django's own middleware (sessions, CSRF,
  authentication, messages…) are `MiddlewareMixin`s whose async side sends each
  `process_request` and `process_response` to a thread and back: about a dozen hops per request,
  ~0.25 ms of CPU each.
- It gives every request a thread of its own (a new `ThreadSensitiveContext`), and with it a new
  database connection, since Django's connections are per thread: ~0.7 ms more, plus the connect.

Here the chain and a sync view run in one hop to a thread, as under WSGI; an async view still
waits on the event loop (Django calls it through `async_to_sync`), its sync parts back on the
request's thread. That thread is lent from the threads kept idle between requests (asgiref's
`ThreadSensitiveContext(executor=…)`) and comes back after the response is sent, with its
database connection: SQLite keeps it open (`CONN_MAX_AGE`), PostgreSQL's goes back to the
process's pool at the request's end as before.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.db import connections
from django.http import HttpRequest, HttpResponse


@dataclass(eq=False)
class Lease:
    """One request's thread, and whether the request's chain is running in it right now."""

    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="request"))
    running: bool = False


class RequestThreads:
    """The threads kept idle between requests, each lent to one request at a time.

    Used only from daphne's event loop, so it needs no lock. A burst of more requests than `keep`
    makes threads that end after it, closing their connections. A thread whose chain still runs
    when its request ends is not lent again: daphne cancels a request whose client left
    `--application-close-timeout` (10 s) before, while its view may still wait (a `?wait=300`),
    and the next request lent that thread would wait behind it."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.idle: list[Lease] = []

    def lend(self) -> Lease:
        return self.idle.pop() if self.idle else Lease()

    def take_back(self, lease: Lease) -> None:
        if not lease.running and len(self.idle) < self.keep:
            self.idle.append(lease)
            return
        # Close the thread's own connections in it (Django's are per thread), after whatever
        # still runs there; left to the garbage collector, a burst's SQLite connections stayed
        # open long after (113 seen). Then the thread ends.
        lease.executor.submit(connections.close_all)
        lease.executor.shutdown(wait=False)


_lease: contextvars.ContextVar[Lease] = contextvars.ContextVar("request_thread")


class OneHopASGIHandler(ASGIHandler):
    """Django's ASGI handler with the sync middleware chain run in one hop on a kept thread."""

    def __init__(self, keep_threads: int) -> None:
        self.threads = RequestThreads(keep_threads)
        super().__init__()

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)  # the chain as WSGI runs it, whatever Django asks

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        lease = self.threads.lend()
        token = _lease.set(lease)
        try:
            async with ThreadSensitiveContext(executor=lease.executor):
                await self.handle(scope, receive, send)
        finally:
            _lease.reset(token)
            self.threads.take_back(lease)

    async def get_response_async(self, request: HttpRequest) -> HttpResponse:
        lease = _lease.get()

        def chain(request: HttpRequest) -> HttpResponse:
            try:
                # Middleware, view and the log line of a 4xx/5xx, in the request's thread, as WSGI does.
                return self.get_response(request)
            finally:
                lease.running = False

        lease.running = True
        return await sync_to_async(chain)(request)
