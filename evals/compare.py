"""Two runs side by side: per case and model, the pass rate before and after, the cases that
flipped, the cost and latency changes, and for each attempt that went wrong in the newer run what
its model saw (the projections of its tool calls) and its replay link.

Why by case name and model: runs are compared across edits of a suite (or between two suites made
from the same file); the attempt rows keep the case as it was, under its name.
"""

from __future__ import annotations

from typing import Any

from evals import trajectory
from evals.models import Attempt, Run


def _cells(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
    from evals.runs import summarize

    summary = run.summary if run.summary.get("cells") is not None and run.status != Run.Status.RUNNING else summarize(run)
    return {(c["case"], c["model"]): c for c in summary["cells"]}


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def compare(before: Run, after: Run) -> dict[str, Any]:
    cells_a, cells_b = _cells(before), _cells(after)
    rows = []
    for key in list(dict.fromkeys([*cells_a, *cells_b])):
        a, b = cells_a.get(key), cells_b.get(key)
        row = {"case": key[0], "model": key[1], "before": a, "after": b, "flip": ""}
        if a and b and a["ok"] != b["ok"]:
            row["flip"] = "fixed" if b["ok"] else "broke"
        elif not a:
            row["flip"] = "new"
        elif not b:
            row["flip"] = "gone"
        if a and b:
            row["pass_rate_change"] = b["pass_rate"] - a["pass_rate"]
            row["cost_change"] = _delta(a["cost_usd"], b["cost_usd"])
            row["latency_change_ms"] = _delta(a["latency_ms"], b["latency_ms"])
        rows.append(row)
    wrong = []
    for attempt in (Attempt.objects.filter(run=after, status__in=[Attempt.Status.FAILED, Attempt.Status.ERROR])
                    .select_related("conversation").order_by("case_position", "pk")):
        calls = trajectory.conversation_tool_calls(attempt.conversation) if attempt.conversation else []
        wrong.append({"attempt": attempt, "failed_checks": [c for c in attempt.checks if not c.get("passed")],
                      "calls": calls})
    return {"rows": rows, "flipped": sum(r["flip"] in ("fixed", "broke") for r in rows),
            "broke": sum(r["flip"] == "broke" for r in rows), "fixed": sum(r["flip"] == "fixed" for r in rows),
            "wrong": wrong}
