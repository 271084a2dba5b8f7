"""A structural diff of two JSON values, with volatile parts ignored by JSON path.

Why not a text diff: a re-run of a tool call is "the same" when its JSON is the same value,
whatever the key order or spacing, and a timestamp or a generated id that changes on every
call must not make it "different". The user names those parts with paths:

- `$.structuredContent.generated_at` (or without the `$.`) one member;
- `$.content[0].text`, `$.content[*].text`, `$.items.*.id` any index / any member (`*`, `[*]`);
- `$..request_id` (or `**.request_id`) that member at any depth;
- `$["odd key"]` a member whose name is not a plain identifier.

Ignoring a path ignores everything below it. Arrays are compared by position.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

Segment = str | int
Path = tuple[Segment, ...]

# How much of a changed value a change keeps (the rest is in the stored results themselves).
PREVIEW_CHARS = 300
# Changes kept per diff: a result that changed everywhere is "different"; 200 lines say so.
MAX_CHANGES = 200

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")


class PatternError(ValueError):
    """A volatile-path pattern that cannot be parsed."""


def format_path(path: Path) -> str:
    """`("content", 0, "text")` -> `$.content[0].text` (odd keys quoted: `$["a b"]`)."""
    out = "$"
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif _IDENT.fullmatch(seg):
            out += f".{seg}"
        else:
            out += f"[{json.dumps(seg, ensure_ascii=False)}]"
    return out


# Pattern tokens: ("key", name) | ("index", n) | ("any",) one segment | ("deep",) any number of segments.
Token = tuple


def parse_pattern(pattern: str) -> list[Token]:
    """Parse a volatile-path pattern (see the module docstring); PatternError when malformed."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise PatternError("A volatile path must be a non-empty string such as $.structuredContent.timestamp.")
    text = pattern.strip()
    if len(text) > 500:
        raise PatternError("A volatile path is at most 500 characters.")
    if text.startswith("$"):
        text = text[1:]
    elif not text.startswith((".", "[")):
        text = "." + text
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        if text.startswith("..", i):
            tokens.append(("deep",))
            i += 2
            if i < len(text) and text[i] not in ".[":
                text = text[:i] + "." + text[i:]  # `$..id` reads as `$..` + `.id`
            continue
        ch = text[i]
        if ch == ".":
            i += 1
            if text.startswith("**", i):
                tokens.append(("deep",))
                i += 2
                continue
            if text.startswith("*", i):
                tokens.append(("any",))
                i += 1
                continue
            m = _IDENT.match(text, i)
            if not m:
                raise PatternError(f"Cannot read the volatile path {pattern!r} at position {i}: expected a name after '.'.")
            tokens.append(("key", m.group()))
            i = m.end()
        elif ch == "[":
            end = _bracket_end(text, i, pattern)
            inner = text[i + 1:end].strip()
            if inner in ("*", "'*'"):
                tokens.append(("any",))
            elif re.fullmatch(r"\d+", inner):
                tokens.append(("index", int(inner)))
            elif inner[:1] in ("'", '"') and inner[-1:] == inner[:1] and len(inner) >= 2:
                tokens.append(("key", _unquote(inner, pattern)))
            else:
                raise PatternError(f"Cannot read [{inner}] in the volatile path {pattern!r}: use [0], [*] or [\"name\"].")
            i = end + 1
        elif text.startswith("**", i) and not tokens:
            tokens.append(("deep",))
            i += 2
        else:
            raise PatternError(f"Cannot read the volatile path {pattern!r} at position {i}.")
    if not tokens or all(t == ("deep",) for t in tokens):
        raise PatternError(f"The volatile path {pattern!r} would ignore the whole result.")
    return tokens


def _bracket_end(text: str, start: int, pattern: str) -> int:
    quote = None
    i = start + 1
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "]":
            return i
        i += 1
    raise PatternError(f"Unclosed [ in the volatile path {pattern!r}.")


def _unquote(inner: str, pattern: str) -> str:
    if inner[0] == "'":
        inner = '"' + inner[1:-1].replace('"', '\\"') + '"'
    try:
        value = json.loads(inner)
    except json.JSONDecodeError as exc:
        raise PatternError(f"Bad quoted name in the volatile path {pattern!r}: {exc.msg}.") from None
    return str(value)


def _match_prefix(tokens: list[Token], path: Path) -> bool:
    """Whether the pattern matches `path` or one of its ancestors."""
    if not tokens:
        return True
    head, rest = tokens[0], tokens[1:]
    if head == ("deep",):
        return any(_match_prefix(rest, path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    seg = path[0]
    if head == ("any",):
        ok = True
    elif head[0] == "key":
        ok = isinstance(seg, str) and seg == head[1]
    else:
        ok = isinstance(seg, int) and seg == head[1]
    return ok and _match_prefix(rest, path[1:])


class Ignore:
    """A set of compiled volatile-path patterns."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns = [p.strip() for p in patterns]
        self._compiled = [parse_pattern(p) for p in self.patterns]

    def __call__(self, path: Path) -> bool:
        return any(_match_prefix(tokens, path) for tokens in self._compiled)


def validate_patterns(patterns: Any) -> list[str]:
    """The patterns, checked (PatternError names the first bad one)."""
    if patterns is None:
        return []
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise PatternError("Volatile paths must be a list of strings such as [\"$.structuredContent.timestamp\"].")
    if len(patterns) > 100:
        raise PatternError("At most 100 volatile paths.")
    Ignore(patterns)
    return [p.strip() for p in patterns]


def preview(value: Any) -> Any:
    """A value small enough to store in a change: itself, or its JSON cut to PREVIEW_CHARS."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=False)
    if len(text) <= PREVIEW_CHARS:
        return value
    return {"$preview": text[:PREVIEW_CHARS] + "…", "$chars": len(text)}


@dataclass
class Diff:
    changes: list[dict[str, Any]]
    total: int
    ignored: int

    @property
    def same(self) -> bool:
        return self.total == 0

    def as_json(self) -> dict[str, Any]:
        return {"changes": self.changes, "total": self.total, "ignored": self.ignored,
                "truncated": self.total > len(self.changes)}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def diff(old: Any, new: Any, ignore: Iterable[str] | Ignore = ()) -> Diff:
    """Every difference between two JSON values, path by path, minus the ignored paths."""
    skip = ignore if isinstance(ignore, Ignore) else Ignore(ignore)
    changes: list[tuple[tuple, dict[str, Any]]] = []
    counts = {"total": 0, "ignored": 0}

    def add(path: Path, kind: str, **values: Any) -> None:
        counts["total"] += 1
        if len(changes) < MAX_CHANGES:
            order = tuple((0, seg, "") if isinstance(seg, int) else (1, 0, seg) for seg in path)
            changes.append((order, {"path": format_path(path), "kind": kind, **{k: preview(v) for k, v in values.items()}}))

    # An explicit stack, not recursion: a hostile result nested 100,000 deep must not crash a worker.
    stack: list[tuple[Path, Any, Any]] = [((), old, new)]
    while stack:
        path, a, b = stack.pop()
        if path and skip(path):
            if a != b:
                counts["ignored"] += 1
            continue
        ka, kb = _kind(a), _kind(b)
        if ka != kb:
            add(path, "changed", old=a, new=b)
        elif ka == "object":
            pending = []
            for key in a:
                if key not in b:
                    if skip(path + (key,)):
                        counts["ignored"] += 1
                    else:
                        add(path + (key,), "removed", old=a[key])
                else:
                    pending.append((path + (key,), a[key], b[key]))
            for key in b:
                if key not in a:
                    if skip(path + (key,)):
                        counts["ignored"] += 1
                    else:
                        add(path + (key,), "added", new=b[key])
            stack.extend(reversed(pending))
        elif ka == "array":
            common = min(len(a), len(b))
            extra: list[tuple[str, Path, Any]] = []
            for i in range(common, len(a)):
                extra.append(("removed", path + (i,), a[i]))
            for i in range(common, len(b)):
                extra.append(("added", path + (i,), b[i]))
            for kind, p, value in extra:
                if skip(p):
                    counts["ignored"] += 1
                elif kind == "removed":
                    add(p, kind, old=value)
                else:
                    add(p, kind, new=value)
            stack.extend(reversed([(path + (i,), a[i], b[i]) for i in range(common)]))
        elif a != b:
            add(path, "changed", old=a, new=b)
    changes.sort(key=lambda c: c[0])
    return Diff(changes=[c for _, c in changes], total=counts["total"], ignored=counts["ignored"])
