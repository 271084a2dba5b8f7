"""Description-review rules. Each rule lives in a module of its own and is listed in the setting
`REVIEW_RULES` (like AUTH_PASSWORD_VALIDATORS): `{"NAME": "dotted.path.Class", "OPTIONS": {...}}`.
A team adds its own by writing a class with `name` and `check(texts, context)` and listing it.

A rule reads `Text`s (every piece of a surface the model reads: tool names, titles, descriptions,
parameter descriptions, prompt texts, server instructions) and returns `Finding`s with the exact
location (subject, field, character offsets) and a severity.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

SEVERITIES = ("info", "low", "medium", "high")


def at_or_above(severity: str, threshold: str) -> bool:
    """Whether `severity` is at least `threshold` (unknown severities count as "info")."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return rank.get(severity, 0) >= rank.get(threshold, 0)


@dataclass(frozen=True)
class Text:
    subject: str  # "tool search", "prompt greet", "server"
    field: str  # "description", "inputSchema.properties.q.description", "instructions", "name"
    text: str


@dataclass
class Finding:
    rule: str
    severity: str
    subject: str
    field: str
    message: str
    start: int = 0  # character offsets of the match inside the text (end exclusive)
    end: int = 0
    excerpt: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Context:
    """What a rule may know beyond the texts: this server's name and tools, and the tools of the
    other servers registered (visible to this server's owner), as {server name: [tool names]}."""

    server_name: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    other_servers: dict[str, list[str]] = field(default_factory=dict)


class Rule(Protocol):
    name: str

    def check(self, texts: list[Text], context: Context) -> Iterable[Finding]: ...


def excerpt(text: str, start: int, end: int, around: int = 40) -> str:
    """The match with some text either side, invisible characters shown as their code points."""
    lo, hi = max(0, start - around), min(len(text), end + around)
    shown = "".join(ch if ch.isprintable() and not _invisible(ch) else f"<U+{ord(ch):04X}>" for ch in text[lo:hi])
    return ("…" if lo else "") + shown + ("…" if hi < len(text) else "")


def _invisible(ch: str) -> bool:
    import unicodedata

    return unicodedata.category(ch) == "Cf"


@lru_cache(maxsize=None)
def _load(entries: tuple) -> tuple[Rule, ...]:
    rules = []
    for name, options in entries:
        rules.append(import_string(name)(**dict(options)))
    return tuple(rules)


def configured_rules() -> tuple[Rule, ...]:
    """The rules of `settings.REVIEW_RULES`, built once per process (per distinct setting)."""
    entries = tuple((e["NAME"], tuple(sorted((e.get("OPTIONS") or {}).items()))) for e in settings.REVIEW_RULES)
    return _load(entries)
