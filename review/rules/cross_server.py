"""References to tools of other servers: a description that names another server's tool steers the
model's use of tools this server does not own (the classic "tool poisoning" of a mail tool)."""

from __future__ import annotations

import re
from typing import Iterable

from review.rules import Context, Finding, Text, excerpt


class CrossServerReference:
    name = "cross-server-reference"

    def __init__(self, severity: str = "medium", min_length: int = 4) -> None:
        self.severity = severity
        self.min_length = min_length  # shorter tool names ("get") match too much ordinary prose

    def check(self, texts: list[Text], context: Context) -> Iterable[Finding]:
        own = {t.get("name") for t in context.tools}
        targets = {}
        for server_name, tools in context.other_servers.items():
            for tool in tools:
                if len(tool) >= self.min_length and tool not in own:
                    targets.setdefault(tool, server_name)
            if len(server_name) >= self.min_length:
                targets.setdefault(server_name, server_name)
        if not targets:
            return
        pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(n) for n in sorted(targets, key=len, reverse=True)) + r")(?![\w-])")
        for t in texts:
            if t.field == "name":
                continue
            for m in pattern.finditer(t.text):
                owner = targets[m.group(1)]
                what = "server" if m.group(1) == owner else f"tool of server “{owner}”"
                yield Finding(self.name, self.severity, t.subject, t.field, f"refers to “{m.group(1)}”, a {what}",
                              m.start(), m.end(), excerpt(t.text, m.start(), m.end()))
