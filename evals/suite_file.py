"""A suite as one versioned JSON file, and back, so a suite can live in an MCP server's repository.

The file holds the suite's name, description, system prompt, its servers by name, the judge's
model name (never its key or API base: a file must not carry secrets or private endpoints), and
every case with its prompts, expectations and threshold. Import checks the whole file before it
writes anything (one transaction); a foreign, newer or malformed file is refused with the reason.
Servers are matched by name among the importer's visible servers when a run starts.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evals import checks
from evals.models import Case, Suite
from tools.models import Server

FORMAT = "mcp-inspector/eval-suite"
VERSION = 1
MAX_CASES = 5000


class SuiteFileError(ValueError):
    """A file that cannot be imported; the message says what is wrong and where."""


class MissingServerError(SuiteFileError):
    """The file is fine but the importer has no server of a name it needs (the CLI: could not run)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CaseEntry(_Strict):
    name: str = Field(min_length=1, max_length=200)
    prompts: list[str] = Field(min_length=1)
    expectations: dict[str, Any] = {}
    tools: list[Annotated[str, Field(min_length=1, max_length=400)]] = Field(default=[], max_length=500)
    threshold: float = Field(default=1.0, ge=0, le=1)


class SuiteDocument(_Strict):
    format: str
    version: int
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    system_prompt: str = ""
    servers: list[str] = []
    judge_model: str = Field(default="", max_length=200)
    cases: list[CaseEntry] = Field(default=[], max_length=MAX_CASES)


def export_suite(suite: Suite) -> dict[str, Any]:
    return {
        "format": FORMAT, "version": VERSION, "name": suite.name, "description": suite.description,
        "system_prompt": suite.system_prompt, "servers": sorted(s.name for s in suite.servers.all()),
        "judge_model": suite.judge_model,
        "cases": [{"name": c.name, "prompts": c.prompts, "expectations": c.expectations, "tools": c.tools,
                   "threshold": c.threshold}
                  for c in suite.cases.order_by("position", "pk")],
    }


def parse(data: bytes | str | dict) -> SuiteDocument:
    """The checked document, or SuiteFileError with the first problems."""
    if not isinstance(data, dict):
        try:
            data = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SuiteFileError(f"The file is not valid JSON: {exc}.") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SuiteFileError(f'This is not an eval suite of the MCP Inspector (expected "format": "{FORMAT}").')
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SuiteFileError('"version" must be a positive integer.')
    if version > VERSION:
        raise SuiteFileError(f"The file is format version {version}, made by a newer inspector; this one reads version {VERSION}.")
    try:
        document = SuiteDocument.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
        raise SuiteFileError("The suite file is invalid: " + "; ".join(problems)) from None
    for i, case in enumerate(document.cases):
        try:
            checks.parse(case.expectations)
        except checks.ExpectationError as exc:
            raise SuiteFileError(f"cases.{i} ({case.name}): {exc}") from None
    return document


def import_suite(data: bytes | str | dict, user, sha256: str = "") -> Suite:
    """A new suite owned by `user` from the file; servers by name among those `user` can see."""
    document = parse(data)
    visible = Server.objects.visible_to(user)
    servers = []
    for name in document.servers:
        match = sorted(visible.filter(name=name), key=lambda s: (s.owner_id != user.pk, s.pk))
        if not match:
            raise MissingServerError(f"You have no server named {name!r}; add it (or import it) first.")
        servers.append(match[0])
    with transaction.atomic():
        suite = Suite.objects.create(owner=user, name=document.name, description=document.description,
                                     system_prompt=document.system_prompt, judge_model=document.judge_model,
                                     imported_sha256=sha256)
        suite.servers.set(servers)
        Case.objects.bulk_create([
            Case(suite=suite, position=i, name=c.name, prompts=c.prompts, expectations=c.expectations, tools=c.tools,
                 threshold=c.threshold)
            for i, c in enumerate(document.cases)
        ])
    return suite
