"""The LLM projection of a tool result: a pure, deterministic function of (result, tool, policy, cap).

Why: the model must never see what is meant only for the user's widget (`structuredContent`,
`_meta`, MCP-UI HTML), must not pay twice for the same data, and must never receive an
unbounded result that breaks a conversation for good once persisted. The full result is kept
elsewhere, untouched.

Policies:
- "app" (forced for MCP App tools) and "strict": content only; no `structuredContent`; every
  `_meta` key removed at any depth; `ui://` embedded resources replaced by a one-line note.
- "content-first" (default): as strict, except that when `content` is empty the
  `structuredContent` is serialised as text. Never both.
- "forward-all": the whole result as JSON, for people debugging what a model would do with it.
Every policy: error results keep their text; the text is capped at `token_cap` tokens of the
conversation's model, counted by litellm's own tokenizer for it (tools/mcp/tokens.py), with an explicit
note saying how much was cut; never an empty message. When the text is cut, the payload holds the
cut text too: the projection row stores what the model was sent, not the 40 MB it was cut from.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tools.mcp import tokens
from tools.mcp.wire_result import LargeJSON, LongText, WireResult, is_blank, is_ui_resource, total_chars

APP_POLICY = "app"
POLICIES = ("content-first", "strict", "forward-all")

APP_VIEW_NOTE = "The result was shown to the user as an interactive view."
EMPTY_NOTE = "The tool returned no content."


@dataclass(frozen=True)
class Outcome:
    payload: dict[str, Any]
    text: str
    policy: str
    removed: list[dict[str, str]] = field(default_factory=list)
    truncated: bool = False
    model: str = ""  # whose tokenizer counts `tokens` ("" = settings.TOKEN_COUNT_MODEL)

    @property
    def size_bytes(self) -> int:
        return len(self.text.encode())

    @cached_property
    def tokens(self) -> int:
        """What the text costs the model, by its real tokenizer (estimated only beyond tokens.EXACT_LIMIT_CHARS)."""
        return tokens.estimate(self.text, self.model or None)


def _strip_meta(value: Any, path: str, removed: list[dict[str, str]]) -> Any:
    """A copy of `value` without any `_meta` key at any depth."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "_meta":
                removed.append({"path": f"{path}._meta", "reason": "metadata is for the client, not the model"})
                continue
            out[key] = _strip_meta(item, f"{path}.{key}", removed)
        return out
    if isinstance(value, list):
        return [_strip_meta(item, f"{path}[{i}]", removed) for i, item in enumerate(value)]
    return value


def _block_text(block: Any) -> str:
    """How one content block reads in a tool message (which carries text only)."""
    if not isinstance(block, dict):
        return json.dumps(block, ensure_ascii=False)
    kind = block.get("type")
    if kind == "text":
        text = block.get("text", "")
        return text if isinstance(text, str) else str(text)  # a LongText stays one
    if kind in ("image", "audio"):
        size = len(str(block.get("data", ""))) * 3 // 4
        return f"[{kind} ({block.get('mimeType', 'unknown type')}, {size} bytes) shown to the user, not included here]"
    if kind == "resource_link":
        name = block.get("name") or block.get("title") or ""
        name = name if isinstance(name, str) else json.dumps(name, ensure_ascii=False)
        return f"[resource link: {block.get('uri', '')}{' (' + name + ')' if name else ''}]"
    if kind == "resource":
        res = block.get("resource")
        if not isinstance(res, dict):
            return json.dumps(block, ensure_ascii=False)
        uri = res.get("uri", "")
        if "text" in res:
            return join_texts([f"[resource {uri}]", res["text"] if isinstance(res["text"], str) else str(res["text"])])
        return f"[binary resource {uri} ({res.get('mimeType', 'unknown type')}) not included]"
    return json.dumps(block, ensure_ascii=False)


NOTE = (
    "\n[truncated: {cut} of {total} characters (about {tokens} tokens) were cut to fit the {cap}-token limit; "
    "the full result is stored and was shown to the user]"
)
# A text is looked at through a window of at most `cap * WINDOW_CHARS_PER_TOKEN` characters first
# (no real text averages more characters a token), widened for the odd text that does (long runs
# of spaces) up to MAX_WINDOW_CHARS: a 40 MB text is never tokenised whole just to be cut.
WINDOW_CHARS_PER_TOKEN = 16
MAX_WINDOW_CHARS = 2_000_000


def _longest_prefix_within(text: str, budget: int, model: str | None, known: int) -> tuple[int, int]:
    """A k (and its count) with count(text[:k]) <= budget, as large as it gets within budget // 1000 tokens.

    `known` is count(text), over the budget. Interpolation on the (nearly linear) count, with a
    bisection step whenever it stops halving the bracket: a cut costs a handful of counts.
    """
    lo, lo_count, hi, hi_count = 0, 0, len(text), known
    slack = budget // 1000
    slow = 0
    while hi - lo > 1 and budget - lo_count > slack:
        if slow >= 2:
            k = (lo + hi) // 2
        else:
            k = lo + (hi - lo) * (budget - lo_count) // max(hi_count - lo_count, 1)
        k = min(max(k, lo + 1), hi - 1)
        width = hi - lo
        n = tokens.count(text[:k], model)
        if n <= budget:
            lo, lo_count = k, n
        else:
            hi, hi_count = k, n
        slow = slow + 1 if hi - lo > width // 2 else 0
    return lo, lo_count


def join_texts(parts: list[str], separator: str = "\n") -> str:
    """`separator.join(parts)`, still a LongText (full length, token estimate) if a part is one."""
    if not any(isinstance(p, LongText) and p.total_chars > len(p) for p in parts):
        return separator.join(parts)
    return LongText.concat(parts, separator)


def _estimate_all(text: str, model: str | None, exact_limit: int) -> int:
    if isinstance(text, LongText) and text.total_chars > len(text):
        return text.estimate_tokens(model)
    return tokens.estimate(text, model, exact_limit=exact_limit)


def cap_text(text: str, token_cap: int, model: str | None = None) -> tuple[str, dict[str, str] | None]:
    """`text` if it fits in `token_cap` real tokens of `model`; else a prefix plus a note saying what was cut.

    The result, note included, is at most `max(token_cap, 1)` tokens by litellm's counter for `model`.
    `text` may be a LongText (a prefix of a text too long to hold): it is cut from that prefix.
    """
    cap = max(token_cap, 1)
    total = total_chars(text)
    window = min(total, cap * WINDOW_CHARS_PER_TOKEN + 1024)
    head_count = tokens.count(text[:window], model)
    while head_count <= cap and window < min(total, MAX_WINDOW_CHARS):
        window = min(total, window * 4, MAX_WINDOW_CHARS)
        head_count = tokens.count(text[:window], model)
    if window == total and head_count <= cap:
        return str(text), None
    head = text[:window]
    total_tokens = head_count if window == total else _estimate_all(text, model, window)

    longest_note = NOTE.format(cut=total, total=total, tokens=total_tokens, cap=token_cap)
    budget = cap - tokens.count(longest_note, model)
    if budget > 0:
        keep, kept_tokens = (window, head_count) if head_count <= budget else _longest_prefix_within(head, budget, model, head_count)
        while True:
            note = NOTE.format(cut=total - keep, total=total, tokens=max(total_tokens - kept_tokens, 1), cap=token_cap)
            capped = text[:keep] + note
            # Tokens can merge across the seam: shorten until the whole is within the cap.
            if tokens.count(capped, model) <= cap or keep == 0:
                break
            keep = max(keep - max(keep // 100, 1), 0)
            kept_tokens = tokens.count(text[:keep], model)
        if keep > 0 or tokens.count(capped, model) <= cap:
            return capped, {"path": "text", "reason": f"truncated {total - keep} of {total} characters"}
    # A cap too small for the full note still says what happened, in as few tokens as it allows.
    short = f"[truncated {total} chars]"
    while len(short) > 1 and tokens.count(short, model) > cap:
        short = short[:-1]
    return short, {"path": "text", "reason": f"truncated {total} of {total} characters"}


def project(
    result: dict[str, Any], *, is_app: bool, policy: str = "content-first", token_cap: int = 8000, model: str | None = None
) -> Outcome:
    """Compute what the model sees of `result`, capped in `model`'s tokens. Never mutates `result`.

    Pure: the same inputs give the same Outcome (the counting model is an input, not a lookup).
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown projection policy {policy!r}; expected one of {', '.join(POLICIES)}")
    if not isinstance(result, dict):
        result = {"content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}]}
    applied = APP_POLICY if is_app else policy
    if applied == "forward-all" and isinstance(result, WireResult):
        result = result.whole()  # the model is sent all of it, so all of it is read
    removed: list[dict[str, str]] = []
    is_error = bool(result.get("isError"))

    if applied == "forward-all":
        payload = copy.deepcopy(result)
        text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    else:
        raw_content = result.get("content")
        content = raw_content if isinstance(raw_content, list) else []
        if "content" in result and not isinstance(raw_content, list):
            removed.append({"path": "content", "reason": "not a list of content blocks"})
        blocks: list[Any] = []
        for i, block in enumerate(content):
            if isinstance(block, dict) and is_ui_resource(block):
                uri = block["resource"]["uri"]
                removed.append({"path": f"content[{i}]", "reason": f"interactive view {uri} replaced by a note"})
                blocks.append({"type": "text", "text": f"[Interactive view {uri} was shown to the user.]"})
            else:
                blocks.append(_strip_meta(block, f"content[{i}]", removed))
        if "_meta" in result:
            removed.append({"path": "_meta", "reason": "metadata is for the client, not the model"})
        for key in result:
            if key not in ("content", "structuredContent", "isError", "_meta"):
                removed.append({"path": key, "reason": "not part of what the model sees"})

        structured = result.get("structuredContent")
        # Blank text blocks say nothing: content-first then falls back to structuredContent.
        blank = all(isinstance(b, dict) and b.get("type") == "text"
                    and is_blank(b["text"] if isinstance(b.get("text"), str) else str(b.get("text", ""))) for b in blocks)
        if "structuredContent" in result:
            if applied == "content-first" and blank and structured is not None:
                if isinstance(structured, LargeJSON):
                    structured = structured.decode()  # the model is sent (a prefix of) it as text
                clean = _strip_meta(structured, "structuredContent", removed)
                blocks = [{"type": "text", "text": json.dumps(clean, ensure_ascii=False, sort_keys=True)}]
                removed.append({"path": "structuredContent", "reason": "serialised as text because content was empty"})
            else:
                reason = "for the view only" if applied == APP_POLICY else "content already carries the result"
                if applied == "strict":
                    reason = "strict policy"
                elif structured is None and applied != APP_POLICY:
                    reason = "null"
                removed.append({"path": "structuredContent", "reason": reason})

        payload = {"content": blocks}
        if is_error:
            payload["isError"] = True
        text = join_texts([t for t in (_block_text(b) for b in blocks) if t])
        if is_error and not is_blank(text):  # a blank error text gets the "without a message" note below
            text = join_texts(["Tool error: ", text], "")

    # Blocks of whitespace only are not sent (however long): the model gets a note instead.
    blank_blocks = is_blank(text) and any(isinstance(b, dict) and b.get("text") for b in payload.get("content") or [])
    if blank_blocks:
        removed.append({"path": "content", "reason": "whitespace only: replaced by a note"})
    if is_blank(text):
        if is_error:
            text = "Tool error: the tool reported an error without a message."
        elif applied == APP_POLICY:
            text = APP_VIEW_NOTE
        else:
            text = EMPTY_NOTE
    text, cut = cap_text(text, token_cap, model)
    if cut:
        removed.append(cut)
    if cut or blank_blocks:
        # The model gets the cut text or the note: the stored payload is that, not the blocks.
        payload = {"content": [{"type": "text", "text": text}]}
        if is_error:
            payload["isError"] = True
    return Outcome(payload=payload, text=text, policy=applied, removed=removed, truncated=cut is not None, model=model or "")
