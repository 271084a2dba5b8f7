"""review/diff.py on the surfaces of tests/mcp_servers/surface.py's v1 and v2, read from the
server module itself (the same dicts the server lists): every change the issue names is found and
classified by its rule. The end-to-end path (listed by a real server, stored, compared on the page
and by the command) is in test_surface_history.py and test_commands.py."""

from __future__ import annotations

import copy

from review import diff
from review.surface import canonical, surface_hash
from tests.mcp_servers import surface as server


def _surface(variant: str) -> dict:
    v = server.VARIANTS[variant]
    return canonical({"tools": v["tools"], "instructions": v["instructions"]}, prompts=v["prompts"])


def _rules(result) -> set[tuple[str, str, str]]:
    return {(c.rule, c.subject, c.path) for c in result.changes}


def test_v1_to_v2_every_change_classified_with_its_rule():
    result = diff.compare(_surface("v1"), _surface("v2"), 100, 120)
    found = _rules(result)
    expected_breaking = {
        ("tool-removed", "tool legacy", ""),
        ("input-made-required", "tool search", "inputSchema.properties.limit"),
        ("input-type-narrowed", "tool search", "inputSchema.properties.limit"),
        ("input-enum-values-removed", "tool search", "inputSchema.properties.mode"),
        # through $ref to $defs/Filter, anyOf[string, integer] -> anyOf[string]
        ("input-type-narrowed", "tool search", "inputSchema.properties.filter.properties.tag"),
        ("input-closed", "tool search", "inputSchema.properties.filter.additionalProperties"),
        ("output-property-removed", "tool search", "outputSchema.properties.total"),
        ("prompt-argument-added-required", "prompt summarize", "arguments.style"),
    }
    expected_risky = {
        ("read-only-dropped", "tool search", "annotations.readOnlyHint"),
        ("destructive-added", "tool search", "annotations.destructiveHint"),
        ("description-changed", "tool search", "description"),
    }
    expected_compatible = {
        ("tool-added", "tool archive", ""),
        ("input-parameter-added-optional", "tool search", "inputSchema.properties.page"),
        ("input-parameter-added-optional", "tool export", "inputSchema.properties.compress"),
        ("title-changed", "tool export", "title"),
        ("token-cost", "server", "tokens"),
    }
    assert found == expected_breaking | expected_risky | expected_compatible
    for change in result.changes:
        wanted = ("breaking" if (change.rule, change.subject, change.path) in expected_breaking else
                  "risky" if (change.rule, change.subject, change.path) in expected_risky else "compatible")
        assert change.severity == wanted, change
    assert result.worst == "breaking" and result.count("breaking") == 8
    # Breaking first; the description change carries a word diff.
    assert result.changes[0].severity == "breaking"
    described = next(c for c in result.changes if c.rule == "description-changed")
    assert ("+", "and tidy it up.") in described.text_diff or any(op == "+" and "tidy" in t for op, t in described.text_diff)
    assert result.as_json()["counts"] == {"breaking": 8, "risky": 3, "compatible": 4}


def test_the_reverse_direction_is_compatible_where_v1_to_v2_broke():
    found = {(c.rule, c.path) for c in diff.compare(_surface("v2"), _surface("v1")).changes}
    assert ("input-type-widened", "inputSchema.properties.limit") in found
    assert ("input-made-optional", "inputSchema.properties.limit") in found
    assert ("input-enum-values-added", "inputSchema.properties.mode") in found
    assert ("input-opened", "inputSchema.properties.filter.additionalProperties") in found
    assert ("output-property-added", "outputSchema.properties.total") in found


def test_output_schema_is_read_as_its_consumers_read_it():
    before = {"tools": [{"name": "t", "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]}
    after = copy.deepcopy(before)
    after["tools"][0]["outputSchema"]["properties"]["n"] = {"type": ["integer", "string"]}
    after["tools"][0]["outputSchema"]["required"] = []
    rules = {c.rule: c.severity for c in diff.compare(before, after).changes}
    assert rules == {"output-type-widened": "breaking", "output-made-optional": "breaking"}


def test_refs_and_anyof_the_same_schema_written_two_ways_is_no_change():
    inline = {"tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}}]}
    by_ref = {"tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
                                                      "$defs": {"A": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}]}
    assert [c.rule for c in diff.compare(inline, by_ref).changes] == []
    # integer is inside number: number -> integer narrows, integer -> number widens
    num = {"tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {"x": {"type": "number"}}}}]}
    int_ = {"tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}}}]}
    assert [c.rule for c in diff.compare(num, int_).changes] == ["input-type-narrowed"]
    assert [c.rule for c in diff.compare(int_, num).changes] == ["input-type-widened"]


def test_canonical_hash_ignores_listing_order():
    a = _surface("v1")
    b = canonical({"tools": list(reversed(server.VARIANTS["v1"]["tools"])), "instructions": "A catalogue server."},
                  prompts=server.VARIANTS["v1"]["prompts"])
    assert surface_hash(a) == surface_hash(b)
    assert surface_hash(a) != surface_hash(_surface("v2"))
