"""SEP-1034: an accepted elicitation's omitted fields take the schema's defaults."""

from tools.elicitation import with_defaults

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
    "verified": {"type": "boolean", "default": True}, "note": {"type": "string"}}}


def test_omitted_fields_take_their_defaults_and_typed_ones_win():
    assert with_defaults(SCHEMA, {"age": 41}) == {"name": "John Doe", "age": 41, "verified": True}


def test_a_schema_without_properties_changes_nothing():
    assert with_defaults({"type": "object"}, {"a": 1}) == {"a": 1}
    assert with_defaults(None, {}) == {}
    assert with_defaults({"properties": ["not", "a", "dict"]}, {}) == {}
