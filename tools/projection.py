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
Every policy: error results keep their text; the text is capped at `token_cap` tokens with an
explicit note saying how much was cut; never an empty message.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from typing import Any

APP_POLICY = "app"
POLICIES = ("content-first", "strict", "forward-all")

APP_VIEW_NOTE = "The result was shown to the user as an interactive view."
EMPTY_NOTE = "The tool returned no content."


def approx_tokens(text: str) -> int:
    """A provider-independent estimate (about four characters a token); good enough to compare sizes."""
    return math.ceil(len(text) / 4)


def json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass(frozen=True)
class Outcome:
    payload: dict[str, Any]
    text: str
    policy: str
    removed: list[dict[str, str]] = field(default_factory=list)
    truncated: bool = False

    @property
    def size_bytes(self) -> int:
        return len(self.text.encode())

    @property
    def tokens(self) -> int:
        return approx_tokens(self.text)


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


def _is_ui_resource(block: dict) -> bool:
    resource = block.get("resource") if block.get("type") == "resource" else None
    return isinstance(resource, dict) and str(resource.get("uri", "")).startswith("ui://")


def _block_text(block: Any) -> str:
    """How one content block reads in a tool message (which carries text only)."""
    if not isinstance(block, dict):
        return json.dumps(block, ensure_ascii=False)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
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
            return f"[resource {uri}]\n{res['text']}"
        return f"[binary resource {uri} ({res.get('mimeType', 'unknown type')}) not included]"
    return json.dumps(block, ensure_ascii=False)


def cap_text(text: str, token_cap: int) -> tuple[str, dict[str, str] | None]:
    if approx_tokens(text) <= token_cap:
        return text, None
    total = len(text)
    budget = max(token_cap, 1) * 4
    note_room = 200
    keep = max(budget - note_room, 0)
    cut = total - keep
    note = (
        f"\n[truncated: {cut} of {total} characters (about {approx_tokens(text) - approx_tokens(text[:keep])} tokens) "
        f"were cut to fit the {token_cap}-token limit; the full result is stored and was shown to the user]"
    )
    if len(note) > budget:
        # A cap too small for the full note still says what happened, in as few characters as it allows.
        note = f"[truncated {total} chars]"[:budget]
        keep, cut = 0, total
    return text[:keep] + note, {"path": "text", "reason": f"truncated {cut} of {total} characters"}


def project(result: dict[str, Any], *, is_app: bool, policy: str = "content-first", token_cap: int = 8000) -> Outcome:
    """Compute what the model sees of `result`. Never mutates `result`."""
    if policy not in POLICIES:
        raise ValueError(f"unknown projection policy {policy!r}; expected one of {', '.join(POLICIES)}")
    if not isinstance(result, dict):
        result = {"content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}]}
    applied = APP_POLICY if is_app else policy
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
            if isinstance(block, dict) and _is_ui_resource(block):
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
        blank = all(isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text", "")).strip() for b in blocks)
        if "structuredContent" in result:
            if applied == "content-first" and blank and structured is not None:
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
        text = "\n".join(t for t in (_block_text(b) for b in blocks) if t)
        if is_error and text:
            text = f"Tool error: {text}"

    if not text.strip():
        if is_error:
            text = "Tool error: the tool reported an error without a message."
        elif applied == APP_POLICY:
            text = APP_VIEW_NOTE
        else:
            text = EMPTY_NOTE
    text, cut = cap_text(text, token_cap)
    if cut:
        removed.append(cut)
    return Outcome(payload=payload, text=text, policy=applied, removed=removed, truncated=cut is not None)
