"""Figures a fault test measures, for bench/faults.py's report.

A test calls `record("routes crawled", 142)`; when the suite runs under bench/faults.py
(FAULTS_FIGURES names a JSON-lines file) the figure is appended there, otherwise nothing
happens. Tests stay plain tests: they assert, the bench only collects what they counted.
"""

from __future__ import annotations

import json
import os
from typing import Any


def record(name: str, value: Any, scenario: str = "") -> None:
    path = os.environ.get("FAULTS_FIGURES")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"scenario": scenario, "name": name, "value": value}) + "\n")
