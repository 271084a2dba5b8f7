"""SEP-1034: an accepted elicitation's omitted fields take the schema's defaults."""

from tools.mcp.elicitation import answer_problems, describe_problems, with_defaults

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
    "verified": {"type": "boolean", "default": True}, "note": {"type": "string"}}}


def test_omitted_fields_take_their_defaults_and_typed_ones_win():
    assert with_defaults(SCHEMA, {"age": 41}) == {"name": "John Doe", "age": 41, "verified": True}


def test_a_schema_without_properties_changes_nothing():
    assert with_defaults({"type": "object"}, {"a": 1}) == {"a": 1}
    assert with_defaults(None, {}) == {}
    assert with_defaults({"properties": ["not", "a", "dict"]}, {}) == {}


# --- a refused answer, in the words shown beside each field (issue 28) ---------------------------------

FORM = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "title": "Your name"},
    "ratio": {"type": "number", "title": "Ratio", "maximum": 10},
    "size": {"type": "string", "enum": ["S", "M"]},
    "moons": {"type": "array", "title": "Moons", "minItems": 1,
              "items": {"anyOf": [{"const": "m-1", "title": "Phobos"}, {"const": "m-2", "title": "Deimos"}]}}}}


def test_problems_are_per_field_and_named_by_title():
    problems = answer_problems(FORM, {"ratio": 12.5, "size": "XL", "moons": []})
    assert problems == {"name": "Required.", "ratio": "Must be at most 10.", "size": "Not one of the choices.",
                        "moons": "Choose at least 1."}
    line = describe_problems(FORM, problems)
    assert "Your name: required." in line and "Moons: choose at least 1." in line
    assert "size: not one of the choices." in line  # an untitled property goes by its name
    assert answer_problems(FORM, {"name": "Ann", "ratio": 2.75, "moons": ["m-2"]}) == {}


def test_a_wrong_kind_an_unknown_choice_and_an_extra_field():
    problems = answer_problems(FORM, {"name": 3, "moons": ["m-9"], "colour": "red"})
    assert problems == {"name": "Must be text.", "moons": "Holds something that is not one of the choices.",
                        "": "The answer has fields the form does not ask for: colour."}
    assert describe_problems(FORM, {"": problems[""]}) == "The answer has fields the form does not ask for: colour."
