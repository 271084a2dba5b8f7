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

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.db import connections
from django.http import HttpRequest, HttpResponse


class RequestThreads:
    """The threads kept idle between requests, each lent to one request at a time.

    Used only from daphne's event loop, so it needs no lock. A burst of more requests than `keep`
    makes threads that end after it, closing their connections. A thread comes back only
    once its request's chain has ended, even when the client went away: Django then sends
    `request_finished` on the request's thread, which waits its turn behind the chain."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.idle: list[ThreadPoolExecutor] = []

    def lend(self) -> ThreadPoolExecutor:
        return self.idle.pop() if self.idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def take_back(self, executor: ThreadPoolExecutor) -> None:
        if len(self.idle) < self.keep:
            self.idle.append(executor)
        else:
            # Close the thread's own connections in it (Django's are per thread); left to the
            # garbage collector, a burst's SQLite connections stayed open long after (113 seen).
            executor.submit(connections.close_all)
            executor.shutdown(wait=False)


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
        executor = self.threads.lend()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.take_back(executor)

    async def get_response_async(self, request: HttpRequest) -> HttpResponse:
        # Middleware, view and the log line of a 4xx/5xx, all in the request's thread, as WSGI does.
        return await sync_to_async(self.get_response)(request)
