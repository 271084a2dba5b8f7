"""The checks, the suite file, the judge's reply and the price map, without workers: pure
functions and the database."""

from __future__ import annotations

import json

import pytest

from evals import checks, cost, judge, suite_file
from evals.checks import ObservedCall, Observation
from evals.models import Case, Suite
from tools.models import Server


def seen(*calls: tuple[str, str, dict], answer: str = "", steps: int = 2) -> Observation:
    return Observation(calls=[ObservedCall(server=s, tool=t, arguments=a) for s, t, a in calls], answer=answer, steps=steps)


def verdicts(expect: dict, observation: Observation) -> list[tuple[str, bool]]:
    return [(r.check, r.passed) for r in checks.evaluate(checks.parse(expect), observation)]


def test_argument_matchers_equal_contains_regex_schema_and_paths():
    args = {"a": 2, "text": "hello world", "tags": ["x", "y"], "opts": {"deep": {"n": 3}, "mode": "fast"}, "items": [{"id": 7}]}
    m = checks.ArgumentMatcher
    cases = [
        (m(path="a", op="equal", value=2), True), (m(path="a", op="equal", value=3), False),
        (m(path="text", op="contains", value="world"), True), (m(path="text", op="contains", value="moon"), False),
        (m(path="tags", op="contains", value="y"), True), (m(path="tags", op="contains", value="z"), False),
        (m(path="opts", op="contains", value={"mode": "fast"}), True), (m(path="opts", op="contains", value={"mode": "slow"}), False),
        (m(path="opts.deep.n", op="equal", value=3), True), (m(path="items.0.id", op="equal", value=7), True),
        (m(path="text", op="regex", value=r"^hel+o\b"), True), (m(path="text", op="regex", value=r"^world"), False),
        (m(path="a", op="regex", value=r"^2$"), True),  # not a string: matched on its JSON
        (m(path="", op="schema", value={"type": "object", "required": ["a", "text"]}), True),
        (m(path="a", op="schema", value={"type": "integer", "minimum": 5}), False),
        (m(path="missing", op="equal", value=None), False),
    ]
    for matcher, expected in cases:
        ok, why = checks.match_argument(args, matcher)
        assert ok is expected, (matcher, why)
        if not ok:
            assert why  # every failure says why


def test_must_call_with_arguments_order_forbidden_steps_and_answer():
    expect = {"must_call": [{"server": "basic", "tool": "add", "arguments": [{"path": "a", "op": "equal", "value": 2}]},
                            {"tool": "echo"}],
              "must_not_call": [{"tool": "crash"}], "max_steps": 3,
              "answer_contains": ["FIVE"], "answer_regex": [r"\b5\b"]}
    good = seen(("basic", "add", {"a": 2, "b": 3}), ("other", "echo", {"text": "x"}), answer="five is 5", steps=3)
    assert all(ok for _, ok in verdicts(expect, good))

    bad = seen(("basic", "add", {"a": 9}), ("basic", "crash", {}), answer="six", steps=4)
    results = checks.evaluate(checks.parse(expect), bad)
    failed = {r.check: r.detail for r in results if not r.passed}
    assert failed["calls basic/add"] == "called, but a is 9, not 2"
    assert failed["calls echo"].startswith("not called (called: basic/add, basic/crash)")
    assert failed["does not call crash"] == "called as call 2"
    assert failed["at most 3 steps"] == "4 steps"
    assert "answer contains “FIVE”" in failed and r"answer matches /\b5\b/" in failed

    # Ordered: the same calls the other way round fail; unordered they pass.
    swapped = seen(("x", "echo", {}), ("basic", "add", {"a": 2}))
    two = {"must_call": [{"tool": "add"}, {"tool": "echo"}]}
    assert all(ok for _, ok in verdicts(two, swapped))
    assert verdicts({**two, "ordered": True}, swapped) == [("calls add (in order)", True), ("calls echo (in order)", False)]
    # A server name that differs is another tool.
    assert verdicts({"must_call": [{"server": "basic", "tool": "add"}]}, seen(("other", "add", {}))) == [("calls basic/add", False)]


def test_bad_expectations_are_refused_with_the_reason():
    for data, reason in [
        ({"must_call": [{"tool": "x", "arguments": [{"op": "regex", "value": "("}]}]}, "must_call.0.arguments.0"),
        ({"must_call": [{"tool": "x", "arguments": [{"op": "schema", "value": {"type": "nope"}}]}]}, "nope"),
        ({"must_call": [{"tool": "x", "arguments": [{"op": "like", "value": 1}]}]}, "op"),
        ({"answer_regex": ["("]}, "answer_regex"),
        ({"max_steps": 0}, "max_steps"),
        ({"judge": {"rubric": "x", "threshold": 2}}, "judge.threshold"),
        ({"typo": 1}, "typo"),
    ]:
        with pytest.raises(checks.ExpectationError) as exc:
            checks.parse(data)
        assert reason in str(exc.value), (data, str(exc.value))


def test_expectations_from_calls_become_equal_matchers_in_order():
    data = checks.expectations_from_calls([ObservedCall("basic", "add", {"a": 2, "b": 3}), ObservedCall("basic", "echo", {"text": "hi"})])
    assert data == {"must_call": [
        {"server": "basic", "tool": "add", "arguments": [{"path": "a", "op": "equal", "value": 2}, {"path": "b", "op": "equal", "value": 3}]},
        {"server": "basic", "tool": "echo", "arguments": [{"path": "text", "op": "equal", "value": "hi"}]}], "ordered": True}
    assert all(ok for _, ok in verdicts(data, seen(("basic", "add", {"a": 2, "b": 3}), ("basic", "echo", {"text": "hi"}))))


def test_judge_reply_and_price_map():
    assert judge.parse_verdict('Sure. {"score": 0.8, "reason": "fine"}') == (0.8, "fine")
    for text in ["no json", '{"score": 3}', '{"reason": "x"}']:
        with pytest.raises((ValueError, KeyError)):
            judge.parse_verdict(text)
    priced = cost.cost_usd("openai/gpt-4o-mini", 1000, 100)
    assert priced is not None and 0 < priced < 0.01
    assert cost.cost_usd("openai/test-model", 1000, 100) is None  # unpriced: shown as no price, not 0


@pytest.mark.django_db
def test_suite_file_round_trip_and_refusals(user, other_user):
    server = Server.objects.create(name="basic", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    suite = Suite.objects.create(owner=user, name="Arithmetic", judge_model="openai/judge", judge_api_key="sk-judge-secret",
                                 judge_api_base="http://judge.internal/v1", system_prompt="Be brief.")
    suite.servers.set([server])
    Case.objects.create(suite=suite, position=1, name="sum", prompts=["2+3?"], threshold=0.5, tools=["basic/add"],
                        expectations={"must_call": [{"server": "basic", "tool": "add"}]})
    data = suite_file.export_suite(suite)
    text = json.dumps(data)
    assert data["format"] == "mcp-inspector/eval-suite" and data["version"] == 1
    assert "sk-judge-secret" not in text and "judge.internal" not in text and "127.0.0.1:9" not in text

    copy = suite_file.import_suite(text.encode(), user)
    assert copy.pk != suite.pk and list(copy.servers.all()) == [server] and copy.system_prompt == "Be brief."
    assert list(copy.cases.values_list("name", "prompts", "threshold", "tools")) == [("sum", ["2+3?"], 0.5, ["basic/add"])]

    before = Suite.objects.count()
    for bad, reason in [
        (b"{nope", "not valid JSON"),
        (json.dumps({"format": "other", "version": 1}).encode(), "not an eval suite"),
        (json.dumps({**data, "version": 2}).encode(), "newer inspector"),
        (json.dumps({**data, "cases": [{"name": "x", "prompts": []}]}).encode(), "cases.0.prompts"),
        (json.dumps({**data, "cases": [{"name": "x", "prompts": ["p"], "expectations": {"max_steps": -1}}]}).encode(), "max_steps"),
    ]:
        with pytest.raises(suite_file.SuiteFileError) as exc:
            suite_file.import_suite(bad, user)
        assert reason in str(exc.value), (reason, str(exc.value))
    with pytest.raises(suite_file.MissingServerError):
        suite_file.import_suite(text, other_user)  # bob has no server named basic
    assert Suite.objects.count() == before
