"""Legacy HTTP+SSE (2024-11-05 servers): a GET event stream for answers, POSTs for requests (Django-free).

Its failures read like Streamable HTTP's (the URL, masked; a refused credential), so it shares
HttpLink's explanations and only opens a different SDK transport.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp.client.sse import sse_client

from tools.mcp.http import HttpLink, bearer_for

SSE_READ_TIMEOUT = 300.0  # an idle event stream this long is presumed dead


class SseLink(HttpLink):
    """A legacy SSE server at ``config.url`` (its large results are not read lean)."""

    def open(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        config = self.config
        return sse_client(config.url, headers=dict(config.headers), timeout=config.connect_timeout,
                          sse_read_timeout=SSE_READ_TIMEOUT, auth=bearer_for(config))
