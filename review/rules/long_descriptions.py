"""Descriptions far longer than their peers' (in tokens): room to hide instructions, and a cost
paid on every request."""

from __future__ import annotations

import statistics
from typing import Iterable

from review.rules import Context, Finding, Text


class LongDescriptions:
    name = "long-description"

    def __init__(self, severity: str = "low", factor: float = 4.0, min_tokens: int = 200) -> None:
        self.severity, self.factor, self.min_tokens = severity, factor, min_tokens

    def check(self, texts: list[Text], context: Context) -> Iterable[Finding]:
        from tools.mcp import tokens

        descriptions = [t for t in texts if t.field == "description" and t.subject.startswith("tool ")]
        counts = {t: tokens.count(t.text) for t in descriptions if t.text}
        for t, n in counts.items():
            peers = [c for other, c in counts.items() if other is not t]
            median = statistics.median(peers) if peers else 0
            if n >= self.min_tokens and n > self.factor * max(median, 1):
                yield Finding(self.name, self.severity, t.subject, t.field,
                              f"{n} tokens, {n / max(median, 1):.0f}× the median of its {len(peers)} peers ({median:.0f})",
                              0, len(t.text), t.text[:80] + ("…" if len(t.text) > 80 else ""))
