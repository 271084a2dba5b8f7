"""Hidden characters: zero-width, bidirectional controls and Unicode tag characters. They hide text
from the person reading a description while the model still reads it (or reorder what is shown)."""

from __future__ import annotations

import unicodedata
from typing import Iterable

from review.rules import Context, Finding, Text, excerpt

BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
ZERO_WIDTH = set("\u200b\u200c\u200d\u2060\ufeff\u180e")


class HiddenUnicode:
    name = "hidden-unicode"

    def __init__(self, severity: str = "high") -> None:
        self.severity = severity

    def _kind(self, ch: str) -> str | None:
        if ch in BIDI:
            return "bidirectional control"
        if ch in ZERO_WIDTH:
            return "zero-width character"
        if 0xE0000 <= ord(ch) <= 0xE007F:
            return "Unicode tag character (invisible ASCII)"
        if unicodedata.category(ch) == "Cf":
            return "invisible format character"
        return None

    def check(self, texts: list[Text], context: Context) -> Iterable[Finding]:
        for t in texts:
            i = 0
            while i < len(t.text):
                kind = self._kind(t.text[i])
                if kind is None:
                    i += 1
                    continue
                j = i
                while j < len(t.text) and self._kind(t.text[j]) is not None:
                    j += 1
                codes = " ".join(f"U+{ord(c):04X}" for c in t.text[i:j][:8])
                yield Finding(self.name, self.severity, t.subject, t.field,
                              f"{j - i} hidden character(s), {kind}: {codes}", i, j, excerpt(t.text, i, j))
                i = j
