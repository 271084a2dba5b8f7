"""URLs and encoded blobs (base64, long hex) in descriptions: places to send data, or instructions
encoded so a person does not read them."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Iterable

from review.rules import Context, Finding, Text, excerpt

URL = re.compile(r"\b(?:https?|ftp|wss?|file|data)://[^\s<>\"')\]]*[^\s<>\"')\].,;:!?]|\bdata:[\w/+.-]+;base64,", re.IGNORECASE)
BASE64 = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{32,}={0,2}(?![A-Za-z0-9+/=])")
HEX = re.compile(r"\b[0-9a-fA-F]{40,}\b")


class UrlsAndBlobs:
    name = "urls-and-blobs"

    def __init__(self, url_severity: str = "low", blob_severity: str = "medium") -> None:
        self.url_severity, self.blob_severity = url_severity, blob_severity

    def check(self, texts: list[Text], context: Context) -> Iterable[Finding]:
        for t in texts:
            for m in URL.finditer(t.text):
                yield Finding(self.name, self.url_severity, t.subject, t.field, f"a URL: {m.group(0)[:100]}",
                              m.start(), m.end(), excerpt(t.text, m.start(), m.end()))
            for m in BASE64.finditer(t.text):
                blob = m.group(0)
                if not (re.search(r"[A-Z]", blob) and re.search(r"[a-z]", blob) and re.search(r"[0-9+/]", blob)):
                    continue  # a long identifier, not an encoding
                decoded = _decoded(blob)
                note = f" (decodes to “{decoded[:60]}”)" if decoded else ""
                yield Finding(self.name, self.blob_severity, t.subject, t.field, f"a base64-like blob of {len(blob)} characters{note}",
                              m.start(), m.end(), excerpt(t.text, m.start(), m.end()))
            for m in HEX.finditer(t.text):
                yield Finding(self.name, self.blob_severity, t.subject, t.field, f"a hex blob of {len(m.group(0))} characters",
                              m.start(), m.end(), excerpt(t.text, m.start(), m.end()))


def _decoded(blob: str) -> str:
    try:
        text = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""
    return text if text.isprintable() else ""
