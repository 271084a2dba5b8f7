"""What a server said about itself when the connection opened: the raw ``initialize`` (2025-11-25
and older) or ``server/discover`` (2026-07-28) result, as sent (Django-free).

Read from the wire by the connection's tap; the SDK's own parsed view is kept only as a fallback
for a result the tap did not see.
"""

from __future__ import annotations

import copy
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


class Handshake:
    def __init__(self) -> None:
        self.raw: dict[str, dict[str, Any]] = {}  # the raw result, by method
        self.protocol_version: str | None = None  # the negotiated version
        self.sdk_snapshot: dict[str, Any] = {}  # fallback if the raw handshake was not seen

    @property
    def is_modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    def _handshake_result(self) -> dict[str, Any]:
        return self.raw.get("server/discover" if self.is_modern else "initialize", {})

    @property
    def server_info(self) -> dict[str, Any] | None:
        """Raw ``serverInfo`` (legacy) or the discover result's ``_meta`` serverInfo stamp (2026)."""
        raw = self._handshake_result()
        if self.is_modern:
            info = (raw.get("_meta") or {}).get(types.SERVER_INFO_META_KEY)
        else:
            info = raw.get("serverInfo")
        return copy.deepcopy(info if info is not None else self.sdk_snapshot.get("serverInfo"))

    @property
    def capabilities(self) -> dict[str, Any]:
        raw = self._handshake_result().get("capabilities")
        return copy.deepcopy(raw if raw is not None else self.sdk_snapshot.get("capabilities", {}))

    @property
    def instructions(self) -> str | None:
        raw = self._handshake_result()
        if "instructions" in raw:
            return raw["instructions"]
        return self.sdk_snapshot.get("instructions")

    @property
    def result(self) -> dict[str, Any]:
        """The raw initialize (legacy) or server/discover (2026) result."""
        return copy.deepcopy(self._handshake_result())

    def remember(self, session: ClientSession) -> None:
        """What the SDK understood of the handshake: the fallback when the raw result was not seen."""
        self.protocol_version = session.protocol_version
        dump = {"by_alias": True, "mode": "json", "exclude_none": True}
        if session.server_info is not None:
            self.sdk_snapshot["serverInfo"] = session.server_info.model_dump(**dump)
        if session.server_capabilities is not None:
            self.sdk_snapshot["capabilities"] = session.server_capabilities.model_dump(**dump)
        self.sdk_snapshot["instructions"] = session.instructions
