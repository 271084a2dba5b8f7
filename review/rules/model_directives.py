"""Text addressed to the model rather than the user: instructions to ignore earlier instructions,
to keep things from the user, to read files or secrets, or to send data elsewhere."""

from __future__ import annotations

import re
from typing import Iterable

from review.rules import Context, Finding, Text, excerpt

PATTERNS: list[tuple[str, str]] = [
    (r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|other|system)\b[^.\n]{0,20}\b(instructions?|prompts?|rules|guidelines)\b",
     "tells the model to ignore its instructions"),
    (r"\b(do\s+not|don'?t|never|without)\b[^.\n]{0,30}\b(tell|inform|mention|reveal|notify|show|alert|let)\b[^.\n]{0,20}\b(the\s+)?users?\b",
     "tells the model to keep something from the user"),
    (r"<\s*(important|system|instructions?|secret)\s*>", "a pseudo-tag that addresses the model"),
    (r"\b(before|after)\s+(using|calling|running)\s+(this|any|the)\b[^.\n]{0,20}\b(tool|function)\b[^.\n]{0,40}\b(read|call|send|fetch|pass|include)\b",
     "tells the model to do something before or after the call"),
    (r"(~/\.ssh|id_rsa|id_ed25519|\.aws/credentials|\.env\b|/etc/passwd|\.netrc|\.npmrc|\.git-credentials|private[_ ]key|api[_ ]keys?|passwords?\b)",
     "mentions files or secrets to read"),
    (r"\b(read|cat|open|load)\b[^.\n]{0,30}\b(file|contents?)\b[^.\n]{0,40}\b(pass|send|include|put|add)\b",
     "asks the model to read a file and pass it on"),
    (r"\b(send|post|upload|forward|exfiltrate|transmit|copy)\b[^.\n]{0,50}\b(to|at)\b\s+(https?://|\S+@\S+|the\s+(following\s+)?(url|endpoint|address|server))",
     "asks the model to send data elsewhere"),
    (r"\b(you\s+must|you\s+are\s+required\s+to|as\s+an?\s+(ai|assistant|llm|language\s+model))\b",
     "speaks to the model as its operator"),
    (r"\bsystem\s+prompt\b", "mentions the system prompt"),
]


class ModelDirectives:
    name = "model-directives"

    def __init__(self, severity: str = "high", extra_patterns: tuple = ()) -> None:
        self.severity = severity
        self.patterns = [(re.compile(p, re.IGNORECASE), why) for p, why in [*PATTERNS, *extra_patterns]]

    def check(self, texts: list[Text], context: Context) -> Iterable[Finding]:
        for t in texts:
            if t.field == "name":
                continue
            for pattern, why in self.patterns:
                for m in pattern.finditer(t.text):
                    yield Finding(self.name, self.severity, t.subject, t.field, f"{why}: “{m.group(0)}”",
                                  m.start(), m.end(), excerpt(t.text, m.start(), m.end()))
