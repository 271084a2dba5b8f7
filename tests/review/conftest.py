"""Fixtures of the review tests: the surface test server (tests/mcp_servers/surface.py) over stdio,
its variant chosen by a state file the test writes, and the surface of each variant as stored."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


class SurfaceState:
    """The file the surface server reads its variant from at every list."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set("v1")

    def set(self, variant: str) -> None:
        self.path.write_text(variant)


@pytest.fixture
def surface_state(tmp_path) -> SurfaceState:
    return SurfaceState(tmp_path / "surface-variant")


@pytest.fixture
def surface_server(surface_state, staff_user):
    """A stdio Server row for tests/mcp_servers/surface.py, owned by a staff user (stdio needs staff)."""
    from tests.mcp_servers.launch import server_path
    from tools.models import Server

    return Server.objects.create(name="catalogue", transport="stdio", command=sys.executable,
                                 args=[server_path("surface.py"), "--state", str(surface_state.path)],
                                 owner=staff_user, shared=True)
