"""Run the client scenarios of the official MCP conformance suite, in both versions this project
pins, against conformance/client.py and print a pass/fail table and each version's total (what
`make conformance` does; the README shows the table).

- 0.1.16 (`@modelcontextprotocol/conformance`): every client scenario of the protocol versions
  this client speaks are scored; its `draft` and `extension` scenarios run too and are counted
  apart.
- 0.2.0-alpha.12 (the npm alias `conformance-0.2`): the frozen 2026-07-28 requirement set
  (`list --requirements 2026-07-28`), each scenario run alone at the 2026-07-28 wire as the
  runner's own `--requirements` run does (`--spec-version 2026-07-28 --force`). The set's
  "run and reported, but never scored" client scenarios (extensions) run too and are counted
  apart.

Results (checks.json per scenario) go to test-artifacts/conformance/<version>/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = HERE.parent
NODE = HERE / "node_modules" / ".bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SUITE_02 = HERE / "node_modules" / "conformance-0.2" / "dist" / "index.js"
OUT = Path(os.environ.get("TEST_ARTIFACTS") or BASE / "test-artifacts") / "conformance"
SPOKEN = {"2025-03-26", "2025-06-18", "2025-11-25"}
REQUIREMENTS = "2026-07-28"


@dataclass(frozen=True)
class Version:
    """One installed version of the suite and how its scenarios are chosen and run."""

    name: str
    entry: Path
    requirements: str = ""  # a frozen requirement set (0.2): its scenarios, at its wire
    every: bool = False  # every client scenario the release lists, at the runner's own wire; extensions apart

    def extra_args(self) -> list[str]:
        return ["--spec-version", self.requirements, "--force"] if self.requirements else []


VERSIONS = {"0.1.16": Version("0.1.16", SUITE), "0.2.0-alpha.12": Version("0.2.0-alpha.12", SUITE_02, REQUIREMENTS),
            "0.2.0-alpha.12-all": Version("0.2.0-alpha.12-all", SUITE_02, every=True)}
BOTH = ["0.1.16", "0.2.0-alpha.12"]  # what `make conformance` runs; `--suite 0.2.0-alpha.12-all` on request
DEFAULT = "0.1.16"


def _node(version: Version, *args: str) -> str:
    return subprocess.run([str(NODE), str(version.entry), *args], capture_output=True, text=True, check=True).stdout


def scenarios(version: Version = VERSIONS[DEFAULT]) -> list[tuple[str, str, bool]]:
    """(scenario, what it belongs to, scored?) for every client scenario of `version`."""
    if not version.requirements:
        listed = _node(version, "list", "--client")
        found = [(m.group(1), m.group(2).split(",")) for m in re.finditer(r"^\s+- (\S+) \[([^\]]*)\]", listed, re.M)]
        if version.every:
            return [(name, ", ".join(versions), "extension" not in versions) for name, versions in found]
        return [(name, ", ".join(versions), bool(SPOKEN & set(versions))) for name, versions in found]
    listed = _node(version, "list", "--client", "--requirements", version.requirements)
    required = re.search(r"Client scenarios[^\n]*\n((?:\s+- \S+\n)+)", listed)
    rows = [(name, version.requirements, True) for name in re.findall(r"- (\S+)", required.group(1) if required else "")]
    for reason, block in re.findall(r"^\s{2}(\S[^\n(]*?) \(\d+\):\n((?:\s{4}- .*\n?)+)", listed, re.M):
        rows += [(name, f"not scored: {reason}", False) for name in re.findall(r"- (\S+) \[client\]", block)]
    return rows


def run(name: str, version: str = DEFAULT) -> tuple[str, str, float]:
    """(outcome, detail, seconds) of one scenario."""
    suite = VERSIONS[version]
    started = time.monotonic()
    target = OUT / version / name.replace("/", "_")
    shutil.rmtree(target, ignore_errors=True)
    command = f"{sys.executable} {HERE / 'client.py'}"
    done = subprocess.run([str(NODE), str(suite.entry), "client", "--command", command, "--scenario", name, "--timeout", "20000",
                           "-o", str(target), *suite.extra_args()], capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - started
    outcome, detail = verdict(done.stdout + done.stderr)
    return outcome, detail, seconds


def verdict(output: str) -> tuple[str, str]:
    """(outcome, detail) from what the runner printed: its own `OVERALL: PASSED` / `FAILED` is the
    outcome (a WARNING check fails a scenario there, so it is not counted as passed here either)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", output)  # the suite reports on stderr, in colour
    overall = re.search(r"OVERALL: (PASSED|FAILED)", text)
    found = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", text)
    if not overall or not found:
        said = text.strip().splitlines()
        return "error", said[-1][:100] if said else "no output"
    passed, total, failed, warnings = map(int, found.groups())
    outcome = "pass" if overall.group(1) == "PASSED" else "fail"
    detail = f"{passed}/{total} checks" + (f", {warnings} warnings" if warnings else "")
    if outcome == "fail":
        first = re.search(r"\[([^\]]+?)\s*\]\s+FAILURE\s+(.*)", text)
        warned = re.search(r"Warning Checks:\s*\n\s*- ([^:\n]+)", text)
        if first:
            detail += f"; first failure: {first.group(1)}: {first.group(2)[:70]}"
        elif warned:
            detail += f"; failed on a warning: {warned.group(1)}"
    return outcome, detail


def run_version(version: str, only: set[str], scored_only: bool) -> dict:
    """Run `version`'s scenarios (all, or `only`), print progress, and answer its rows and totals."""
    rows, totals = [], {"scored": [0, 0], "not scored": [0, 0]}
    for name, belongs, scored in scenarios(VERSIONS[version]):
        if only and name not in only:
            continue
        if scored_only and not scored:
            continue
        outcome, detail, seconds = run(name, version)
        kind = "scored" if scored else "not scored"
        totals[kind][0] += outcome == "pass"
        totals[kind][1] += 1
        rows.append((name, belongs, outcome, detail, seconds))
        print(f"{outcome:8} {version} {name} ({seconds:.1f} s)", file=sys.stderr, flush=True)
    return {"rows": rows, "totals": totals}


def total_line(version: str, totals: dict) -> str:
    passed, graded = totals["scored"]
    chosen = VERSIONS[version]
    what = (f"the {chosen.requirements} requirement set" if chosen.requirements
            else "every client scenario but the extensions" if chosen.every else "scenarios of 2025-03-26 to 2025-11-25")
    line = f"{version}: {passed}/{graded} passed ({what})"
    if totals["not scored"][1]:
        line += f"; not scored (draft, extensions): {totals['not scored'][0]}/{totals['not scored'][1]} passed"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=[*VERSIONS, "both"], default="both",
                        help="which suite version to run (default: both, i.e. 0.1.16 and the 0.2 requirement set; "
                             "0.2.0-alpha.12-all: every client scenario of 0.2 at the runner's own wire)")
    parser.add_argument("--scenario", action="append", default=[], help="run only this scenario (repeatable)")
    parser.add_argument("--scored-only", action="store_true", help="skip the scenarios not scored (draft, extensions)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    chosen = BOTH if args.suite == "both" else [args.suite]
    results = {version: run_version(version, set(args.scenario), args.scored_only) for version in chosen}
    for version, result in results.items():
        print(f"\n{version}\n")
        print("| scenario | belongs to | result | detail |")
        print("|---|---|---|---|")
        for name, belongs, outcome, detail, _ in result["rows"]:
            print(f"| `{name}` | {belongs} | {outcome} | {detail} |")
    print()
    for version, result in results.items():
        print(total_line(version, result["totals"]))
    print(f"checks in {OUT.relative_to(BASE) if OUT.is_relative_to(BASE) else OUT}/")
    (OUT / "summary.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
