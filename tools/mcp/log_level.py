"""The level a server is asked to log at: ``logging/setLevel`` on 2025-11-25, a ``_meta`` stamp on
every request on 2026-07-28 (Django-free). Changed on the live connection, without reconnecting.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import LOG_LEVEL_META_KEY

from tools.mcp.config import RAW

if TYPE_CHECKING:  # (the connection owns this object; imported for the annotation only)
    from tools.mcp.connection import Connection

logger = logging.getLogger(__name__)


class ServerLogging:
    """The level one connection asks its server to log at (None: no log messages asked for)."""

    def __init__(self, conn: Connection, level: str | None) -> None:
        self.conn = conn
        self.level = level

    async def apply(self, client: Client) -> None:
        """logging/setLevel on a legacy connection whose server logs (2026-07-28 opts in per request)."""
        if not self.level or self.conn.is_modern or "logging" not in self.conn.capabilities:
            return
        try:
            await client.session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level=self.level)), RAW  # type: ignore[arg-type]
            )
        except MCPError as exc:
            logger.info("logging/setLevel on %s refused: %s", self.conn.config.name, exc.error.message)

    def stamp(self, params: Any) -> None:
        """2026-07-28 logging is opted into per request: the level rides each request's ``_meta``."""
        if self.conn.is_modern and self.level and params is not None and hasattr(params, "meta"):
            params.meta = {**(params.meta or {}), LOG_LEVEL_META_KEY: self.level}

    async def set(self, level: str | None) -> str:
        """Change the level the server logs at, on this live connection; says how it was applied.

        2025-11-25: ``logging/setLevel`` (the server must offer ``logging``). 2026-07-28: the next
        requests carry the level in ``_meta`` (there is no setLevel). Blank on a legacy
        connection keeps the level the server has: setLevel cannot say "your default"."""
        if self.conn.is_modern:
            self.level = level or None
            if not level:
                return "the next requests ask for no log messages (2026-07-28 logging is opted into per request)"
            return f"the next requests ask for {level} and above (2026-07-28: the level rides each request's _meta)"
        if not level:
            self.level = None
            return "kept the level the server has now (logging/setLevel has no “server default”); it applies from the next connection"
        if "logging" not in self.conn.capabilities:
            raise ValueError(f"{self.conn.config.name} does not offer logging (no `logging` capability), so it takes no logging/setLevel")
        await self.conn.request(types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)))  # type: ignore[arg-type]
        self.level = level
        return f"logging/setLevel {level} sent on the live connection"
