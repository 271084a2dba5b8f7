"""The LLM projection (`tools.runtime.projection.project`): property-based and example-based tests.

The projection is the only thing the model ever sees of a tool result, so these tests check
the invariant of ARCHITECTURE.md ("The one invariant") and sep-tool-result-visibility.md
directly on the pure function, over generated CallToolResult-like dicts.

Marker strings make leaks detectable: every string that lives only where the model must not
look carries a sentinel character that the generator never uses anywhere else:

- `SC` ("§") inside `structuredContent`;
- `META` ("¤") inside every `_meta` value, at any depth;
- `UI` ("¶") inside the HTML of `ui://` embedded resources (MCP-UI / MCP Apps views);
- `EXTRA` ("¢") inside unknown top-level fields of the result.

Truncation keeps a prefix of the text, so a leaked marker (or any part of it) still shows its
sentinel; a single character is enough to prove a leak.
"""

from __future__ import annotations

import copy
import json
import random
import re
import time
import uuid
from typing import Any

import litellm
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tools.mcp import tokens
from tools.runtime.projection import (
    APP_POLICY,
    APP_VIEW_NOTE,
    EMPTY_NOTE,
    POLICIES,
    Outcome,
    project,
)

SC, META, UI, EXTRA = "§", "¤", "¶", "¢"
SENTINELS = SC + META + UI + EXTRA
KNOWN_TOP_LEVEL = ("content", "structuredContent", "isError", "_meta")
BIG_CAP = 10**9  # large enough that nothing generated is ever truncated

# How `cap_text` behaves (tools/runtime/projection.py): tokens are the real ones, litellm's counter for the
# model (`tokens.count`). A text over the cap keeps a prefix and appends a note of about 40 tokens
# saying how much was cut; the prefix is as long as fits (within cap // 1000 tokens). When even the
# note does not fit (caps under ~45 tokens), the text is only a short note, "[truncated N chars]",
# itself cut to the cap. Either way a capped text is at most `max(cap, 1)` real tokens.
NOTE_TOKENS = 50  # the note's tokens, with room for its numbers, in any of the models below
MODELS = ("openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "some-provider/unknown-model")
TRUNCATION_NOTE = re.compile(
    r"\n\[truncated: (?P<cut>\d+) of (?P<total>\d+) characters \(about (?P<tokens>\d+) tokens\) "
    r"were cut to fit the (?P<cap>-?\d+)-token limit; the full result is stored and was shown to the user\]\Z"
)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------

visible_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters=SENTINELS)
visible_text = st.text(visible_chars, max_size=20)
# Dict keys in visible places; `_meta` is added deliberately, never by chance.
visible_keys = visible_text.filter(lambda k: k not in ("_meta", "structuredContent"))


def _marker(sentinel: str, tag: str) -> st.SearchStrategy[str]:
    return st.integers(0, 10**6).map(lambda n: f"{sentinel}{tag}{n}{sentinel}")


sc_marker = _marker(SC, "sc")
meta_marker = _marker(META, "meta")
ui_marker = _marker(UI, "ui")
extra_marker = _marker(EXTRA, "extra")

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    visible_text,
)


def _json(leaf: st.SearchStrategy, keys: st.SearchStrategy[str], max_leaves: int = 6) -> st.SearchStrategy:
    return st.recursive(
        leaf,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
        max_leaves=max_leaves,
    )


def _with_marker(marker: st.SearchStrategy[str], body: st.SearchStrategy) -> st.SearchStrategy:
    """A JSON value of `body` that is sure to contain one `marker` string somewhere visible to a leak."""
    return st.one_of(
        marker,
        st.tuples(marker, body).map(lambda t: [t[0], t[1]]),
        st.tuples(marker, st.dictionaries(visible_keys, body, max_size=3)).map(lambda t: {**t[1], "marker": t[0]}),
    )


# A `_meta` value: anything, with META markers in it (and markers only, so any leak is visible).
meta_values = _with_marker(meta_marker, _json(st.one_of(json_scalars, meta_marker), visible_keys, max_leaves=5))


def _maybe_meta(value: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    """A dict that may carry a `_meta` key (with markers), at the position the dict is at."""
    return st.tuples(value, st.one_of(st.none(), meta_values)).map(
        lambda t: t[0] if t[1] is None else {**t[0], "_meta": t[1]}
    )


def _json_with_meta(leaf: st.SearchStrategy) -> st.SearchStrategy:
    """Arbitrary JSON in which any dict, at any depth, may carry a `_meta` key."""
    return st.recursive(
        leaf,
        lambda children: st.lists(children, max_size=3) | _maybe_meta(st.dictionaries(visible_keys, children, max_size=3)),
        max_leaves=6,
    )


visible_json_with_meta = _json_with_meta(json_scalars)
# structuredContent: arbitrary JSON holding SC markers, whose dicts may carry `_meta` (META markers).
structured_values = _with_marker(sc_marker, _json_with_meta(st.one_of(json_scalars, sc_marker)))

annotations = st.fixed_dictionaries(
    {}, optional={"audience": st.lists(st.sampled_from(["user", "assistant"]), max_size=2), "priority": st.floats(0, 1)}
)


def _block(fields: dict[str, st.SearchStrategy], optional: dict[str, st.SearchStrategy] | None = None) -> st.SearchStrategy[dict]:
    optional = {"annotations": _maybe_meta(annotations), "extra": visible_json_with_meta, **(optional or {})}
    return _maybe_meta(st.fixed_dictionaries(fields, optional=optional))


# Long texts are built by repetition: cheap for Hypothesis to generate (random 3000-character
# strings would exhaust its per-example budget and bias generation towards tiny results).
long_text = st.one_of(
    visible_text,
    visible_text,
    st.sampled_from(["", " ", "\n", " \t\n "]),  # empty and whitespace-only texts
    st.builds(lambda s, n: (s or "L") * n, st.text(visible_chars, min_size=1, max_size=8), st.integers(20, 1000)),
)
text_blocks = _block({"type": st.just("text"), "text": long_text})
media_blocks = _block(
    {
        "type": st.sampled_from(["image", "audio"]),
        "data": st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=200),
    },
    {"mimeType": st.sampled_from(["image/png", "audio/wav", "application/octet-stream"])},
)
link_blocks = _block(
    {"type": st.just("resource_link"), "uri": st.builds("file:///{}".format, visible_text)},
    {"name": visible_text, "title": visible_text, "mimeType": visible_text},
)
plain_resources = _maybe_meta(
    st.fixed_dictionaries(
        {"uri": st.sampled_from(["file:///a.txt", "https://example.com/x", "memo://1"])},
        optional={"mimeType": st.sampled_from(["text/plain", "text/html"]), "text": long_text, "blob": st.just("AAAA")},
    )
)
embedded_blocks = _block({"type": st.just("resource"), "resource": plain_resources})
ui_resources = _maybe_meta(
    st.fixed_dictionaries(
        {
            "uri": st.builds("ui://{}".format, visible_text),
            "mimeType": st.sampled_from(["text/html", "text/html;profile=mcp-app", "text/uri-list"]),
        },
        optional={
            "text": ui_marker.map(lambda m: f"<!doctype html><html><body><script>render({m!r})</script></body></html>"),
            "blob": ui_marker,
        },
    )
)
ui_blocks = _block({"type": st.just("resource"), "resource": ui_resources})
unknown_blocks = _block({"type": visible_text.filter(lambda t: t not in ("text", "image", "audio", "resource_link", "resource"))})
non_dict_blocks = st.one_of(json_scalars, st.lists(visible_json_with_meta, max_size=3))

block_kinds = {
    "text": text_blocks,
    "media": media_blocks,
    "link": link_blocks,
    "embedded": embedded_blocks,
    "ui": ui_blocks,
    "unknown": unknown_blocks,
    "non-dict": non_dict_blocks,
}
blocks = st.sampled_from(["text", "text", "ui", "ui", "media", "link", "embedded", "unknown", "non-dict"]).flatmap(block_kinds.__getitem__)
odd_content = st.one_of(json_scalars, st.dictionaries(visible_keys, visible_json_with_meta, max_size=2))
unknown_fields = st.dictionaries(
    visible_keys.filter(lambda k: k not in KNOWN_TOP_LEVEL),
    _with_marker(extra_marker, _json(json_scalars, visible_keys, max_leaves=4)),
    max_size=2,
)


@st.composite
def results(draw) -> dict[str, Any]:
    result: dict[str, Any] = {}
    # Explicit weights (one_of tends to favour its simplest branches under Hypothesis' budget).
    shape = draw(st.sampled_from(["blocks"] * 7 + ["empty"] * 2 + ["odd", "missing"]))
    if shape == "blocks":
        result["content"] = draw(st.lists(blocks, min_size=1, max_size=5))
    elif shape == "empty":
        result["content"] = []
    elif shape == "odd":  # odd shapes: content that is not a list
        result["content"] = draw(odd_content)
    if draw(st.booleans()):
        result["structuredContent"] = draw(st.one_of(structured_values, structured_values, st.none()))
    if draw(st.booleans()):
        result["isError"] = draw(st.booleans())
    if draw(st.booleans()):
        result["_meta"] = draw(meta_values)
    result.update(draw(unknown_fields))
    # Shuffle the key order: nothing may depend on it.
    keys = draw(st.permutations(list(result)))
    return {k: result[k] for k in keys}


policies = st.sampled_from(POLICIES)
caps = st.one_of(st.just(8000), st.integers(-5, 1200))


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def walk(value: Any):
    """Every (key, value) pair of every dict at any depth of `value`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def containers(value: Any):
    """Every dict and list at any depth of `value`, `value` included."""
    if isinstance(value, (dict, list)):
        yield value
        for item in value.values() if isinstance(value, dict) else value:
            yield from containers(item)


def keys_anywhere(value: Any) -> set[str]:
    return {k for k, _ in walk(value)}


def without_meta(value: Any) -> Any:
    """An independent reference for "`_meta` removed at any depth"."""
    if isinstance(value, dict):
        return {k: without_meta(v) for k, v in value.items() if k != "_meta"}
    if isinstance(value, list):
        return [without_meta(v) for v in value]
    return value


def content_list(result: dict) -> list:
    content = result.get("content")
    return content if isinstance(content, list) else []


def is_ui_block(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "resource"
        and isinstance(block.get("resource"), dict)
        and str(block["resource"].get("uri", "")).startswith("ui://")
    )


def text_of(block: Any) -> str | None:
    """The text a text block carries, if it is one."""
    if isinstance(block, dict) and block.get("type") == "text":
        return str(block.get("text", ""))
    return None


def dumped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def assert_no_leak(outcome: Outcome, sentinels: str) -> None:
    serialised_payload = dumped(outcome.payload)
    for s in sentinels:
        assert s not in outcome.text, f"marker {s!r} leaked into the text: {outcome.text!r}"
        assert s not in serialised_payload, f"marker {s!r} leaked into the payload: {serialised_payload!r}"


def strip_error_prefix(text: str) -> str:
    return text.removeprefix("Tool error: ")


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


@FAST
@given(result=results(), policy=policies, cap=caps)
def test_app_tools_never_expose_structured_content_meta_or_view_html(result, policy, cap):
    outcome = project(result, is_app=True, policy=policy, token_cap=cap)

    assert outcome.policy == APP_POLICY  # forced, whatever the server/tool policy says
    found = keys_anywhere(outcome.payload)
    assert "structuredContent" not in found
    assert "_meta" not in found
    assert_no_leak(outcome, SENTINELS)


@FAST
@given(result=results(), cap=caps)
def test_strict_never_forwards_structured_content_nor_meta(result, cap):
    outcome = project(result, is_app=False, policy="strict", token_cap=cap)

    assert outcome.policy == "strict"
    assert {"structuredContent", "_meta"}.isdisjoint(keys_anywhere(outcome.payload))
    assert_no_leak(outcome, SENTINELS)


@FAST
@given(result=results())
def test_content_first_never_forwards_both(result):
    outcome = project(result, is_app=False, policy="content-first", token_cap=BIG_CAP)

    assert outcome.policy == "content-first"
    assert {"structuredContent", "_meta"}.isdisjoint(keys_anywhere(outcome.payload))
    assert_no_leak(outcome, META + UI + EXTRA)  # `_meta`, view HTML and unknown fields: never
    structured = result.get("structuredContent")
    blank = all(isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text", "")).strip()
                for b in content_list(result))
    if not blank:
        # Content carries the result: structuredContent must not be sent as well.
        assert_no_leak(outcome, SC)
    elif structured is not None:
        # Content is empty or only blank text: structuredContent (without any `_meta`) is what the model gets.
        assert json.loads(strip_error_prefix(outcome.text)) == without_meta(structured)
        assert any(e["path"] == "structuredContent" for e in outcome.removed)


@FAST
@given(result=results(), policy=policies, is_app=st.booleans(), cap=caps)
def test_input_is_never_mutated_nor_aliased(result, policy, is_app, cap):
    before = copy.deepcopy(result)
    outcome = project(result, is_app=is_app, policy=policy, token_cap=cap)
    assert result == before

    # The payload is stored as its own row: it must not share mutable parts with the full
    # result, or editing one would edit the other.
    for container in list(containers(outcome.payload)):
        container.clear()
    assert result == before


@FAST
@given(
    result=results(), policy=policies, is_app=st.booleans(), model=st.sampled_from(MODELS),
    cap=st.one_of(st.integers(-5, 60), st.integers(0, 400), st.integers(0, 3000)),
)
def test_text_is_capped_with_an_explicit_note(result, policy, is_app, cap, model):
    full = project(result, is_app=is_app, policy=policy, token_cap=BIG_CAP, model=model)
    assert not full.truncated
    outcome = project(result, is_app=is_app, policy=policy, token_cap=cap, model=model)

    # Never over the cap by the model's real tokenizer (a cap under one token counts as one).
    assert outcome.tokens == tokens.count(outcome.text, model) <= max(cap, 1)
    assert outcome.policy == full.policy

    full_tokens = tokens.count(full.text, model)
    if full_tokens <= max(cap, 1):
        assert outcome == full
        return
    assert outcome.truncated is True
    assert outcome.removed[:-1] == full.removed
    # What is stored is what the model was sent: the cut text, not the blocks it was cut from.
    assert outcome.payload == {"content": [{"type": "text", "text": outcome.text}], **({"isError": True} if result.get("isError") else {})}
    cut_entry = outcome.removed[-1]
    assert cut_entry["path"] == "text"
    total = len(full.text)
    if "\n[truncated: " not in outcome.text:
        # Only a cap too small for the full note gets the short one, cut to the cap.
        assert cap < NOTE_TOKENS
        assert outcome.text and f"[truncated {total} chars]".startswith(outcome.text)
        assert cut_entry["reason"] == f"truncated {total} of {total} characters"
        return
    keep = outcome.text.rindex("\n[truncated: ")
    assert cut_entry["reason"] == f"truncated {total - keep} of {total} characters"
    # The kept text is the beginning of the full text, as much of it as fits, then the note.
    assert outcome.text[:keep] == full.text[:keep]
    assert outcome.tokens >= cap - NOTE_TOKENS - cap // 100 - 3
    match = TRUNCATION_NOTE.fullmatch(outcome.text[keep:])
    assert match, f"no truncation note in {outcome.text[keep:]!r}"
    assert int(match["cut"]) == total - keep > 0
    assert int(match["total"]) == total
    assert int(match["tokens"]) == max(full_tokens - tokens.count(full.text[:keep], model), 1)
    assert int(match["cap"]) == cap


@FAST
@given(result=results(), policy=policies, is_app=st.booleans(), cap=caps)
def test_text_is_never_empty(result, policy, is_app, cap):
    outcome = project(result, is_app=is_app, policy=policy, token_cap=cap)
    assert outcome.text.strip()
    assert outcome.tokens >= 1


@FAST
@given(result=results(), policy=policies, is_app=st.booleans())
def test_error_results_keep_their_error_text(result, policy, is_app):
    result = {**result, "isError": True}
    outcome = project(result, is_app=is_app, policy=policy, token_cap=BIG_CAP)

    if outcome.policy == "forward-all":
        assert json.loads(outcome.text) == result
        return
    assert outcome.payload["isError"] is True
    assert outcome.text.startswith("Tool error: ")
    # Blank texts alone say nothing: content-first then sends structuredContent instead.
    texts = [t for t in (text_of(b) for b in content_list(result)) if t and t.strip()]
    for t in texts:
        assert t in outcome.text
    if not texts and not outcome.text.removeprefix("Tool error: ").strip():
        pytest.fail("an error result lost its text")


@FAST
@given(result=results(), policy=policies, is_app=st.booleans())
def test_error_prefix_survives_a_realistic_cap(result, policy, is_app):
    """Any cap that keeps some text keeps the start of it, so the model still learns it failed."""
    result = {**result, "isError": True}
    if policy == "forward-all" and not is_app:
        policy = "strict"  # forward-all shows the whole result as JSON: no prefix to keep
    outcome = project(result, is_app=is_app, policy=policy, token_cap=60)
    assert outcome.text.startswith("Tool error:")


@FAST
@given(result=results(), policy=policies, is_app=st.booleans(), cap=caps)
def test_deterministic(result, policy, is_app, cap):
    first = project(result, is_app=is_app, policy=policy, token_cap=cap)
    again = project(copy.deepcopy(result), is_app=is_app, policy=policy, token_cap=cap)
    assert first == again
    assert dumped(first.payload) == dumped(again.payload)  # same key order too
    assert first.truncated == again.truncated


@FAST
@given(result=results(), policy=st.sampled_from(("content-first", "strict")), is_app=st.booleans())
def test_removed_names_what_was_removed(result, policy, is_app):
    outcome = project(result, is_app=is_app, policy=policy, token_cap=BIG_CAP)
    paths = [e["path"] for e in outcome.removed]
    assert all(isinstance(e.get("reason"), str) and e["reason"] for e in outcome.removed)

    if "_meta" in result:
        assert "_meta" in paths
    if "structuredContent" in result:
        assert "structuredContent" in paths
    for key in result:
        if key not in KNOWN_TOP_LEVEL:
            assert key in paths
    for i, block in enumerate(content_list(result)):
        mine = [p for p in paths if p == f"content[{i}]" or p.startswith((f"content[{i}].", f"content[{i}]["))]
        if is_ui_block(block):
            assert mine == [f"content[{i}]"]
        else:
            # One entry per `_meta` key in the block, at any depth (a `_meta` inside a `_meta`
            # goes with its parent).
            assert len(mine) == _count_meta(block)
            assert all(p.endswith("._meta") for p in mine)
    assert len(paths) == len(set(paths))


def _count_meta(value: Any) -> int:
    if isinstance(value, dict):
        return sum(1 if k == "_meta" else _count_meta(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_count_meta(v) for v in value)
    return 0


@FAST
@given(result=results(), is_app=st.booleans())
@example(result={"content": [{"type": "text", "text": ""}, {"type": "text", "text": " "}]}, is_app=False)
def test_content_blocks_read_as_text(result, is_app):
    """Every text block's text, every link and every non-view embedded text reaches the model."""
    outcome = project(result, is_app=is_app, policy="strict", token_cap=BIG_CAP)
    for block in content_list(result):
        if not isinstance(block, dict):
            continue
        if text_of(block) is not None:
            if text_of(block).strip():  # a whitespace-only result becomes the "no content" note
                assert text_of(block) in outcome.text
        elif block.get("type") == "resource_link":
            assert f"[resource link: {block['uri']}" in outcome.text
        elif block.get("type") == "resource" and not is_ui_block(block) and "text" in block["resource"]:
            assert block["resource"]["text"] in outcome.text
        elif block.get("type") in ("image", "audio"):
            assert f"[{block['type']} (" in outcome.text
    texts = [text_of(b) for b in content_list(result) if isinstance(b, dict) and text_of(b) is not None]
    if outcome.text.startswith(("Tool error: the tool reported an error without a message", EMPTY_NOTE, APP_VIEW_NOTE)) and any(texts):
        # Blocks of whitespace only: the model gets a note, and the payload is that note.
        assert outcome.payload["content"] == [{"type": "text", "text": outcome.text}]
    else:
        assert len(outcome.payload["content"]) == len(content_list(result))


# ---------------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------------

APP_RESULT = {
    "content": [{"type": "text", "text": "Here is the weather for Paris.", "_meta": {"x": "META-BLOCK"}}],
    "structuredContent": {"city": "Paris", "temps": [11, 12, 14], "secret": "SC-SECRET", "_meta": {"y": "META-SC"}},
    "_meta": {"openai/widgetState": {"z": "META-TOP"}, "ui": {"resourceUri": "ui://weather/view"}},
    "isError": False,
}


@pytest.mark.parametrize("policy", POLICIES)
def test_app_result_keeps_only_the_content_summary(policy):
    outcome = project(APP_RESULT, is_app=True, policy=policy)

    assert outcome.policy == "app"
    assert outcome.text == "Here is the weather for Paris."
    assert outcome.payload == {"content": [{"type": "text", "text": "Here is the weather for Paris."}]}
    for marker in ("SC-SECRET", "META-BLOCK", "META-SC", "META-TOP", "temps", "resourceUri"):
        assert marker not in outcome.text
        assert marker not in dumped(outcome.payload)
    assert {e["path"] for e in outcome.removed} == {"content[0]._meta", "_meta", "structuredContent"}
    assert outcome.truncated is False


@pytest.mark.parametrize("is_app,policy", [(True, "content-first"), (False, "content-first"), (False, "strict")])
def test_mcp_ui_resource_is_replaced_by_a_one_line_note(is_app, policy):
    html = "<html><body><h1>HTML-SECRET</h1>\n<script>alert(1)</script></body></html>"
    result = {
        "content": [
            {"type": "text", "text": "Chart below."},
            {"type": "resource", "resource": {"uri": "ui://charts/42", "mimeType": "text/html", "text": html, "_meta": {"a": 1}}},
        ]
    }
    outcome = project(result, is_app=is_app, policy=policy)

    assert "HTML-SECRET" not in outcome.text
    assert "<html" not in outcome.text and "<html" not in dumped(outcome.payload)
    assert outcome.text.split("\n") == ["Chart below.", "[Interactive view ui://charts/42 was shown to the user.]"]
    note_block = outcome.payload["content"][1]
    assert note_block == {"type": "text", "text": "[Interactive view ui://charts/42 was shown to the user.]"}
    assert "\n" not in note_block["text"]
    assert [e["path"] for e in outcome.removed] == ["content[1]"]
    assert "ui://charts/42" in outcome.removed[0]["reason"]


def test_plain_embedded_resources_are_not_mistaken_for_views():
    result = {"content": [{"type": "resource", "resource": {"uri": "file:///ui/page.html", "mimeType": "text/html", "text": "<p>doc</p>"}}]}
    outcome = project(result, is_app=True, policy="content-first")
    assert outcome.text == "[resource file:///ui/page.html]\n<p>doc</p>"
    assert outcome.removed == []


@pytest.mark.parametrize(
    "result",
    [
        {"content": [], "structuredContent": {"temperature": 21}},
        {"structuredContent": {"temperature": 21}},
        {"content": []},
        {"content": [], "_meta": {"ui": {"resourceUri": "ui://x"}}},
    ],
)
@pytest.mark.parametrize("policy", POLICIES)
def test_app_result_without_content_gets_the_interactive_view_note(result, policy):
    outcome = project(result, is_app=True, policy=policy)
    assert outcome.text == APP_VIEW_NOTE
    assert "shown to the user as an interactive view" in outcome.text
    assert "21" not in outcome.text
    assert outcome.payload == {"content": []}


def test_non_app_empty_result_gets_the_empty_note():
    for policy in ("content-first", "strict"):
        assert project({"content": []}, is_app=False, policy=policy).text == EMPTY_NOTE
    assert project({"content": [], "structuredContent": {"a": 1}}, is_app=False, policy="strict").text == EMPTY_NOTE
    assert project({}, is_app=False, policy="strict").text == EMPTY_NOTE


def test_content_first_serialises_structured_content_only_when_content_is_empty():
    structured = {"b": [1, 2], "a": "x", "_meta": {"hidden": True}}
    only = project({"content": [], "structuredContent": structured}, is_app=False, policy="content-first")
    assert only.text == '{"a": "x", "b": [1, 2]}'
    assert only.payload == {"content": [{"type": "text", "text": '{"a": "x", "b": [1, 2]}'}]}

    both = project({"content": [{"type": "text", "text": "a is x"}], "structuredContent": structured}, is_app=False)
    assert both.text == "a is x"
    assert both.removed == [{"path": "structuredContent", "reason": "content already carries the result"}]


def test_forward_all_keeps_everything():
    result = {**APP_RESULT, "unknownField": {"kept": True}, "content": [*APP_RESULT["content"], {"type": "resource", "resource": {"uri": "ui://v", "text": "<html/>"}}]}
    outcome = project(result, is_app=False, policy="forward-all")

    assert outcome.policy == "forward-all"
    assert outcome.payload == result
    assert outcome.payload is not result
    assert json.loads(outcome.text) == result
    for marker in ("SC-SECRET", "META-BLOCK", "META-SC", "META-TOP", "<html/>", "unknownField"):
        assert marker in outcome.text
    assert outcome.removed == []
    assert outcome.truncated is False


def test_forward_all_is_overridden_for_app_tools():
    outcome = project(APP_RESULT, is_app=True, policy="forward-all")
    assert outcome.policy == "app"
    assert "SC-SECRET" not in outcome.text


@pytest.mark.parametrize("policy", ["", "app", "Strict", "forward_all", "none", None])
@pytest.mark.parametrize("is_app", [False, True])
def test_unknown_policy_raises(policy, is_app):
    with pytest.raises(ValueError, match="unknown projection policy"):
        project({"content": []}, is_app=is_app, policy=policy)


def test_removed_lists_every_removal_with_a_reason():
    result = {
        "content": [
            {"type": "text", "text": "ok", "_meta": {"a": 1}, "annotations": {"_meta": {"b": 2}}},
            {"type": "resource", "resource": {"uri": "ui://w", "text": "<html/>"}},
            {"type": "resource", "resource": {"uri": "file:///f", "text": "f", "_meta": {"c": 3}}},
        ],
        "structuredContent": {"x": 1},
        "_meta": {"d": 4},
        "vendorExtension": {"e": 5},
    }
    outcome = project(result, is_app=True, policy="content-first")
    removed = {e["path"]: e["reason"] for e in outcome.removed}
    assert set(removed) == {
        "content[0]._meta",
        "content[0].annotations._meta",
        "content[1]",
        "content[2].resource._meta",
        "structuredContent",
        "_meta",
        "vendorExtension",
    }
    assert all(removed.values())
    assert "interactive view ui://w" in removed["content[1]"]
    assert removed["structuredContent"] == "for the view only"

    strict = project(result, is_app=False, policy="strict")
    assert {e["path"]: e["reason"] for e in strict.removed}["structuredContent"] == "strict policy"


def test_error_results():
    outcome = project({"content": [{"type": "text", "text": "division by zero"}], "isError": True}, is_app=True)
    assert outcome.text == "Tool error: division by zero"
    assert outcome.payload == {"content": [{"type": "text", "text": "division by zero"}], "isError": True}

    silent = project({"content": [], "isError": True, "structuredContent": {"code": 7}}, is_app=True)
    assert silent.text == "Tool error: the tool reported an error without a message."

    structured = project({"content": [], "isError": True, "structuredContent": {"code": 7}}, is_app=False)
    assert structured.text == 'Tool error: {"code": 7}'


@pytest.mark.parametrize("model", MODELS)
def test_truncation_example(model):
    outcome = project({"content": [{"type": "text", "text": "a" * 10_000}]}, is_app=False, token_cap=100, model=model)
    assert outcome.truncated is True
    assert outcome.tokens <= 100
    assert outcome.text.startswith("a" * 100)
    keep = outcome.text.index("\n[truncated: ")
    assert f"[truncated: {10_000 - keep} of 10000 characters (about " in outcome.text
    assert outcome.removed == [{"path": "text", "reason": f"truncated {10_000 - keep} of 10000 characters"}]
    # The payload is what the model is sent, capped: not the 10,000 characters it was cut from.
    assert outcome.payload == {"content": [{"type": "text", "text": outcome.text}]}

    # The boundary is the real count: a text of exactly `cap` tokens passes whole, one token less cuts it.
    text = " ".join(f"item-{i}" for i in range(300))
    cap = tokens.count(text, model)
    exact = project({"content": [{"type": "text", "text": text}]}, is_app=False, token_cap=cap, model=model)
    assert exact.truncated is False and exact.text == text and exact.tokens == cap
    over = project({"content": [{"type": "text", "text": text}]}, is_app=False, token_cap=cap - 1, model=model)
    assert over.truncated is True and over.tokens <= cap - 1


def test_odd_shapes_do_not_break_the_projection():
    for result in (
        {"content": "just a string"},
        {"content": None},
        {"content": {"type": "text", "text": "not in a list"}},
        {"content": [None, 3, "bare string", ["x", {"_meta": {"m": 1}}], {"no": "type"}]},
        {},
    ):
        for policy in POLICIES:
            outcome = project(result, is_app=False, policy=policy)
            assert outcome.text.strip()
            assert "_meta" not in keys_anywhere(outcome.payload) or policy == "forward-all"
    non_dict = project({"content": [["x", {"_meta": {"m": "HIDDEN"}}]]}, is_app=True)
    assert "HIDDEN" not in non_dict.text
    assert non_dict.text == '["x", {}]'
    # A result that is not an object at all is shown as JSON text rather than crashing.
    assert project(["a"], is_app=False).text == '["a"]'


def test_media_and_links_are_described_not_inlined():
    data = "QUJD" * 100  # 300 bytes once decoded
    outcome = project(
        {
            "content": [
                {"type": "image", "data": data, "mimeType": "image/png"},
                {"type": "audio", "data": "", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///r.txt", "name": "r"},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": data, "mimeType": "application/pdf"}},
            ]
        },
        is_app=False,
    )
    assert data not in outcome.text
    assert outcome.text.split("\n") == [
        "[image (image/png, 300 bytes) shown to the user, not included here]",
        "[audio (audio/wav, 0 bytes) shown to the user, not included here]",
        "[resource link: file:///r.txt (r)]",
        "[binary resource file:///b.bin (application/pdf) not included]",
    ]


# ---------------------------------------------------------------------------------------------
# Regressions: bugs these tests found (malformed blocks crashed project(); a note alone went
# over a tiny cap; content that is not a list vanished without a `removed` entry)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        {"type": "resource", "resource": "not an object"},
        {"type": "resource", "resource": ["a list"]},
        {"type": "resource_link", "uri": "file:///x", "name": 5},
        {"type": "resource_link", "uri": "file:///x", "title": {"a": 1}},
    ],
)
@pytest.mark.parametrize("policy", POLICIES)
def test_malformed_blocks_do_not_crash(block, policy):
    # Blocks come from the MCP server: one malformed block must not lose the whole result.
    outcome = project({"content": [block], "structuredContent": {"s": "SC-SECRET"}}, is_app=True, policy=policy)
    assert outcome.text.strip()
    assert "SC-SECRET" not in outcome.text


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("cap", [-3, 0, 1, 2, 7, 12, 20, 36, 49, 50, 60])
def test_tiny_caps_are_respected(cap, model):
    outcome = project({"content": [{"type": "text", "text": "z" * 5000}]}, is_app=False, token_cap=cap, model=model)
    assert outcome.truncated
    assert outcome.tokens <= max(cap, 1)
    assert outcome.text.strip()
    if tokens.count("[truncated 5000 chars]", model) <= cap:  # room enough to say how much was cut
        assert "5000" in outcome.text


def test_non_list_content_is_named_in_removed():
    outcome = project({"content": "a bare string"}, is_app=False, policy="strict")
    assert "content" in [e["path"] for e in outcome.removed]


@pytest.mark.parametrize("model", MODELS)
def test_cap_bound_is_tight_at_the_note_room(model):
    """Not a tautology: the capped text is `cap` real tokens at most, and comes close to it."""
    text = json.dumps([{"id": str(uuid.UUID(int=i * 7919)), "n": i * 1.5} for i in range(5000)], separators=(",", ":"))
    for cap in (50, 51, 100, 8000):
        outcome = project({"content": [{"type": "text", "text": text}]}, is_app=False, token_cap=cap, model=model)
        assert outcome.truncated
        assert cap - NOTE_TOKENS - cap // 1000 <= outcome.tokens <= cap


# ---------------------------------------------------------------------------------------------
# Real token counts (issue 9.3): JSON costs two to three times what four characters a token says
# ---------------------------------------------------------------------------------------------


def _uuid_json(count: int) -> str:
    """Compact JSON of random UUIDs and numbers (seeded): what tool results of records look like."""
    rng = random.Random(count)
    return json.dumps(
        [{"id": str(uuid.UUID(int=rng.getrandbits(128))), "ref": str(uuid.UUID(int=rng.getrandbits(128))),
          "value": round(rng.uniform(-1e6, 1e6), 4), "n": rng.randrange(10**9)} for _ in range(count)],
        separators=(",", ":"),
    )


@pytest.mark.parametrize("model", MODELS)
def test_json_heavy_result_is_capped_under_the_real_count(model):
    text = _uuid_json(3000)
    cap = 8000
    # The bug this guards against: a cap on len/4 would have let this much through.
    assert litellm.token_counter(model=tokens.counting_name(model), text=text[: cap * 4]) > cap * 1.5

    outcome = project({"content": [{"type": "text", "text": text}]}, is_app=False, token_cap=cap, model=model)
    assert outcome.truncated
    assert litellm.token_counter(model=tokens.counting_name(model), text=outcome.text) <= cap
    assert outcome.tokens <= cap
    assert "were cut to fit the 8000-token limit; the full result is stored and was shown to the user]" in outcome.text
    assert outcome.payload == {"content": [{"type": "text", "text": outcome.text}]}


def test_openai_models_count_with_their_own_encoding():
    """`openai/gpt-4o-mini` is counted as gpt-4o-mini (o200k_base), Anthropic models with the bundled Anthropic tokenizer."""
    text = _uuid_json(50)
    assert tokens.counting_name("openai/gpt-4o-mini") == "gpt-4o-mini"
    assert tokens.counting_name("openrouter/anthropic/claude-sonnet-4-5") == "claude-sonnet-4-5"
    assert tokens.count(text, "openai/gpt-4o-mini") == litellm.token_counter(model="gpt-4o-mini", text=text)
    assert tokens.count(text, "anthropic/claude-sonnet-4-5") == litellm.token_counter(model="claude-sonnet-4-5", text=text)
    assert tokens.count(text, "anthropic/claude-sonnet-4-5") != tokens.count(text, "openai/gpt-4o-mini")
    for model, name in (("openai/gpt-4", "gpt-4"), ("some-provider/unknown-model", "unknown-model"),
                        ("deepseek/deepseek-chat", "deepseek-chat")):
        assert tokens.count(text, model) == litellm.token_counter(model=name, text=text)


def test_the_tokenizer_is_chosen_once_per_model(monkeypatch):
    """litellm would choose the tokenizer again on every count; the choice is kept per model name."""
    import litellm.utils

    chosen = []
    real = litellm.utils.select_tokenizer
    monkeypatch.setattr(litellm.utils, "select_tokenizer", lambda name, *a, **k: chosen.append(name) or real(name, *a, **k))
    tokens._chosen.clear()
    try:
        counts = [tokens.count(f"{i} and some words", "openai/gpt-4o-mini") for i in range(3)]
        assert counts == [litellm.token_counter(model="gpt-4o-mini", text=f"{i} and some words") for i in range(3)]
        assert chosen.count("gpt-4o-mini") == 1 + 3  # ours once, then litellm's own counts above
    finally:
        tokens._chosen.clear()


def test_tokenizers_that_litellm_would_download_are_not_downloaded():
    """Llama tokenizers (and Cohere's) come from Hugging Face: counted with the bundled cl100k_base instead."""
    from litellm.utils import huggingface_tokenizer_kind

    text = _uuid_json(20)
    for model in ("ollama/llama-3-8b-instruct", "replicate/meta/llama-2-70b"):
        assert huggingface_tokenizer_kind(tokens.counting_name(model)) is not None  # litellm would download
        assert tokens.count(text, model) == litellm.token_counter(model="gpt-3.5-turbo", text=text)


def test_a_huge_input_is_cut_without_being_tokenised_and_stores_a_small_payload():
    text = _uuid_json(1000) * 330  # about 40 MB
    assert len(text) > 35_000_000
    project({"content": [{"type": "text", "text": "warm"}]}, is_app=False, model="openai/gpt-4o-mini")
    cpu = time.process_time()
    outcome = project({"content": [{"type": "text", "text": text}]}, is_app=False, token_cap=8000, model="openai/gpt-4o-mini")
    # Cut by characters to a window first: tokenising 40 MB (or cutting it by tokens) takes seconds.
    assert time.process_time() - cpu < 0.25  # about 0.02 s when cut by characters first; 0.4 s if not
    assert outcome.truncated and outcome.tokens <= 8000
    assert len(json.dumps(outcome.payload)) < 100_000  # not the 40 MB
    assert f"of {len(text)} characters" in outcome.text


def test_estimate_is_exact_below_the_threshold_and_close_above():
    small = _uuid_json(100)
    assert tokens.estimate(small, "openai/gpt-4o-mini") == tokens.count(small, "openai/gpt-4o-mini")
    big = _uuid_json(12000)  # about 1.5 MB: sampled
    assert len(big) > tokens.EXACT_LIMIT_CHARS
    exact = tokens.count(big, "openai/gpt-4o-mini")
    assert abs(tokens.estimate(big, "openai/gpt-4o-mini") - exact) <= exact * 0.03


def test_content_first_falls_back_to_structured_content_when_content_is_blank():
    result = {"content": [{"type": "text", "text": "  \n"}], "structuredContent": {"temperature": 21}}
    outcome = project(result, is_app=False, policy="content-first")
    assert json.loads(outcome.text) == {"temperature": 21}
    strict = project(result, is_app=False, policy="strict")
    assert "21" not in strict.text
