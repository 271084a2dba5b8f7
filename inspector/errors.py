"""What went wrong, said by the layer that knows (a call's runtime, a form of data), not by HTTP.

Lower layers raise these; inspector/api.py `api_view` turns them into JSON answers (the one place
that knows their HTTP statuses), and pages show their message. `extra` carries fields a client
can act on (`status_now`, `fields`).
"""

from __future__ import annotations

from typing import Any


class Problem(Exception):
    """A failure a person can act on; the message says how."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class Invalid(Problem):
    """The request asks for something that cannot be (a bad answer, a value out of range)."""


class Conflict(Problem):
    """The thing is no longer in a state where this can be done (already answered, ended)."""


class Unavailable(Problem):
    """Nothing answered in time: no worker took the request."""
