"""Run every client scenario of the official MCP conformance suite against conformance/client.py
and print a pass/fail table (what `make conformance` does; the README shows the table).

Scenarios of the protocol versions this client speaks are run; `draft` and `extension`
scenarios are listed as not run. Results (checks.json per scenario) go to
test-artifacts/conformance/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = HERE.parent
NODE = HERE / "node_modules" / ".bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
OUT = Path(os.environ.get("TEST_ARTIFACTS") or BASE / "test-artifacts") / "conformance"
SPOKEN = {"2025-03-26", "2025-06-18", "2025-11-25"}


def scenarios() -> list[tuple[str, list[str]]]:
    listed = subprocess.run([str(NODE), str(SUITE), "list", "--client"], capture_output=True, text=True, check=True).stdout
    return [(m.group(1), m.group(2).split(",")) for m in re.finditer(r"^\s+- (\S+) \[([^\]]*)\]", listed, re.M)]


def run(name: str) -> tuple[str, str, float]:
    """(outcome, detail, seconds) of one scenario."""
    started = time.monotonic()
    target = OUT / name.replace("/", "_")
    shutil.rmtree(target, ignore_errors=True)
    command = f"{sys.executable} {HERE / 'client.py'}"
    done = subprocess.run([str(NODE), str(SUITE), "client", "--command", command, "--scenario", name, "--timeout", "20000",
                           "-o", str(target)], capture_output=True, text=True, timeout=120)
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


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    rows, counts = [], {"pass": 0, "fail": 0, "error": 0, "not run": 0}
    for name, versions in scenarios():
        if not SPOKEN & set(versions):
            rows.append((name, ", ".join(versions), "not run", "draft or extension scenario", 0.0))
            counts["not run"] += 1
            continue
        outcome, detail, seconds = run(name)
        counts[outcome] += 1
        rows.append((name, ", ".join(versions), outcome, detail, seconds))
        print(f"{outcome:8} {name} ({seconds:.1f} s)", file=sys.stderr, flush=True)
    print("| scenario | spec versions | result | detail |")
    print("|---|---|---|---|")
    for name, versions, outcome, detail, _ in rows:
        print(f"| `{name}` | {versions} | {outcome} | {detail} |")
    print()
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors, {counts['not run']} not run; "
          f"checks in {OUT.relative_to(BASE) if OUT.is_relative_to(BASE) else OUT}/")
    (OUT / "summary.json").write_text(json.dumps({"counts": counts, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
