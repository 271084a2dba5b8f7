"""A tool whose name is also a tool of another registered server: the model may call the wrong
one, and a server can take over a trusted tool's calls by shadowing its name."""

from __future__ import annotations

from typing import Iterable

from review.rules import Context, Finding, Text


class ToolShadowing:
    name = "tool-shadowing"

    def __init__(self, severity: str = "medium") -> None:
        self.severity = severity

    def check(self, texts: list[Text], context: Context) -> Iterable[Finding]:
        for tool in context.tools:
            name = str(tool.get("name") or "")
            owners = sorted(s for s, tools in context.other_servers.items() if name in tools)
            if owners:
                yield Finding(self.name, self.severity, f"tool {name}", "name",
                              f"the tool name “{name}” is also a tool of {', '.join(f'“{o}”' for o in owners)}",
                              0, len(name), name)
