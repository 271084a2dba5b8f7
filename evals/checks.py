"""What a case expects, and the pure function that checks one attempt against it.

Why pure: the same expectations are checked by the run's worker, shown on the case page and
exercised by fast unit tests; nothing here reads the database (the attempt's conversation is read
once, by evals/trajectory.py, into an `Observation`).

Expectations (stored as JSON on the case, and in the suite file):

    {"must_call": [{"server": "basic", "tool": "add",
                    "arguments": [{"path": "a", "op": "equal", "value": 2},
                                  {"path": "", "op": "schema", "value": {"required": ["a", "b"]}}]}],
     "must_not_call": [{"server": "", "tool": "crash"}],
     "ordered": true, "max_steps": 3,
     "answer_contains": ["5"], "answer_regex": ["\\bfive\\b|5"],
     "judge": {"rubric": "Says the sum is 5.", "threshold": 0.7}}

`server` empty means any server. A matcher's `path` is a dotted path into the arguments ("" the
whole object, `items.0.name` a list element). Ops: `equal`; `contains` (a substring of a string,
an element of a list, a sub-object of an object); `regex` (re.search on the string, or on the
JSON of anything else); `schema` (a JSON Schema the value must satisfy).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


def _compile(pattern: str) -> None:
    """ValueError (which pydantic reports with the field's place) for a pattern that does not compile."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression /{pattern}/: {exc}") from None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArgumentMatcher(Strict):
    path: str = ""
    op: Literal["equal", "contains", "regex", "schema"]
    value: Any = None

    @model_validator(mode="after")
    def _valid_value(self) -> "ArgumentMatcher":
        if self.op == "regex":
            if not isinstance(self.value, str):
                raise ValueError("a regex matcher's value must be a string")
            _compile(self.value)
        if self.op == "schema":
            if not isinstance(self.value, dict):
                raise ValueError("a schema matcher's value must be a JSON Schema object")
            try:
                jsonschema.validators.validator_for(self.value).check_schema(self.value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        return self


class ToolRef(Strict):
    server: str = ""
    tool: str = Field(min_length=1)

    def label(self) -> str:
        return f"{self.server}/{self.tool}" if self.server else self.tool

    def matches(self, call: "ObservedCall") -> bool:
        return call.tool == self.tool and (not self.server or call.server == self.server)


class ToolExpectation(ToolRef):
    arguments: list[ArgumentMatcher] = []


class Judge(Strict):
    rubric: str = Field(min_length=1)
    threshold: float = Field(default=0.7, ge=0, le=1)


class Expectations(Strict):
    must_call: list[ToolExpectation] = []
    must_not_call: list[ToolRef] = []
    ordered: bool = False
    max_steps: int | None = Field(default=None, ge=1)
    answer_contains: list[str] = []
    answer_regex: list[str] = []
    judge: Judge | None = None

    @field_validator("answer_regex")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            _compile(p)
        return patterns


class ExpectationError(ValueError):
    """Expectations that cannot be used, with one sentence per problem."""


def parse(data: Any) -> Expectations:
    """Validated expectations, or ExpectationError naming what is wrong (for forms, the API and imports)."""
    if data in (None, ""):
        data = {}
    try:
        return Expectations.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "expectations"
            problems.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
        raise ExpectationError("; ".join(problems)) from None


@dataclass
class ObservedCall:
    """One tool call the model made, as evals/trajectory.py read it."""

    server: str
    tool: str
    arguments: dict[str, Any]
    status: str = ""
    projection: str = ""
    id: str = ""


@dataclass
class Observation:
    """What an attempt's conversation did: its calls in order, its final answer, its LLM steps."""

    calls: list[ObservedCall] = field(default_factory=list)
    answer: str = ""
    steps: int = 0


@dataclass
class CheckResult:
    check: str
    passed: bool
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"check": self.check, "passed": self.passed, "detail": self.detail}


_MISSING = object()


def _at(value: Any, path: str) -> Any:
    """The value at a dotted path, or _MISSING."""
    if not path:
        return value
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _contains(haystack: Any, needle: Any) -> bool:
    if isinstance(haystack, str):
        return isinstance(needle, str) and needle in haystack
    if isinstance(haystack, list):
        return any(item == needle for item in haystack)
    if isinstance(haystack, dict) and isinstance(needle, dict):
        return all(k in haystack and (haystack[k] == v or _contains(haystack[k], v) if isinstance(v, (dict, list)) else haystack[k] == v)
                   for k, v in needle.items())
    return False


def match_argument(arguments: dict[str, Any], matcher: ArgumentMatcher) -> tuple[bool, str]:
    """Does one matcher hold? (passed, why not)."""
    where = matcher.path or "arguments"
    value = _at(arguments, matcher.path)
    if value is _MISSING:
        return False, f"{where} is missing"
    if matcher.op == "equal":
        return (value == matcher.value, f"{where} is {json.dumps(value)}, not {json.dumps(matcher.value)}")
    if matcher.op == "contains":
        return (_contains(value, matcher.value), f"{where} ({json.dumps(value)[:200]}) does not contain {json.dumps(matcher.value)}")
    if matcher.op == "regex":
        text = value if isinstance(value, str) else json.dumps(value)
        return (re.search(matcher.value, text) is not None, f"{where} ({text[:200]}) does not match /{matcher.value}/")
    errors = sorted(jsonschema.validators.validator_for(matcher.value)(matcher.value).iter_errors(value), key=str)
    return (not errors, f"{where} fails the schema: {errors[0].message}" if errors else "")


def _call_matches(call: ObservedCall, expected: ToolExpectation) -> tuple[bool, str]:
    if not expected.matches(call):
        return False, ""
    for m in expected.arguments:
        ok, why = match_argument(call.arguments, m)
        if not ok:
            return False, why
    return True, ""


def evaluate(expect: Expectations, seen: Observation) -> list[CheckResult]:
    """Every check of the case against what the attempt did (the judge is separate: evals/judge.py)."""
    results: list[CheckResult] = []
    used: set[int] = set()
    cursor = 0  # ordered: each expected call must come after the previous one's match
    for expected in expect.must_call:
        found, reasons = None, []
        for i, call in enumerate(seen.calls):
            if i in used or (expect.ordered and i < cursor):
                continue
            ok, why = _call_matches(call, expected)
            if ok:
                found = i
                break
            if why:
                reasons.append(why)
        label = f"calls {expected.label()}" + (" (in order)" if expect.ordered else "")
        if found is None:
            if reasons:
                detail = f"called, but {reasons[0]}"
            elif any(expected.matches(c) for c in seen.calls):
                detail = "called, but not in the expected order"
            else:
                detail = f"not called (called: {', '.join(f'{c.server}/{c.tool}' for c in seen.calls) or 'nothing'})"
            results.append(CheckResult(label, False, detail))
        else:
            used.add(found)
            cursor = found + 1
            results.append(CheckResult(label, True, f"call {found + 1}"))
    for forbidden in expect.must_not_call:
        hits = [i + 1 for i, c in enumerate(seen.calls) if forbidden.matches(c)]
        results.append(CheckResult(f"does not call {forbidden.label()}", not hits,
                                   f"called as call {', '.join(map(str, hits))}" if hits else ""))
    if expect.max_steps is not None:
        results.append(CheckResult(f"at most {expect.max_steps} steps", seen.steps <= expect.max_steps, f"{seen.steps} steps"))
    for text in expect.answer_contains:
        ok = text.lower() in seen.answer.lower()
        results.append(CheckResult(f"answer contains “{text}”", ok, "" if ok else f"answer: {seen.answer[:200]!r}"))
    for pattern in expect.answer_regex:
        ok = re.search(pattern, seen.answer) is not None
        results.append(CheckResult(f"answer matches /{pattern}/", ok, "" if ok else f"answer: {seen.answer[:200]!r}"))
    return results


def expectations_from_calls(calls: list[ObservedCall], answer: str = "") -> dict[str, Any]:
    """A case's starting expectations from a stored conversation: its calls, in order, with their
    arguments as `equal` matchers (edit them to loosen)."""
    return Expectations(
        must_call=[ToolExpectation(server=c.server, tool=c.tool,
                                   arguments=[ArgumentMatcher(path=k, op="equal", value=v) for k, v in c.arguments.items()])
                   for c in calls],
        ordered=len(calls) > 1,
    ).model_dump(exclude_defaults=True)
