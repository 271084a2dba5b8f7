#!/usr/bin/env python
"""An eval run's overhead per case beyond the model's own time.

    .venv/bin/python bench/evals.py [--cases 20] [--delay 0.5] [--concurrency 4] [--postgres URL]

Runs tests/evals/test_overhead.py on the real stack (a Celery worker, the basic MCP server over
Streamable HTTP, the scripted LLM holding each request --delay seconds) through
`python -m inspector.launch test` and prints what it measured: per case, the attempt's wall time
(first user message stored -> verdict stored) minus the model's time (2 requests x --delay).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = str(BASE_DIR / ".venv" / "bin" / "python") if (BASE_DIR / ".venv" / "bin" / "python").exists() else sys.executable


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the scripted model takes per request")
    parser.add_argument("--concurrency", type=int, default=4, help="attempts at once (one provider)")
    parser.add_argument("--postgres", default="", help="a PostgreSQL URL for the test database (default: SQLite)")
    args = parser.parse_args()
    figures = Path(tempfile.mkstemp(prefix="evals-bench-", suffix=".jsonl")[1])
    env = {**os.environ, "FAULTS_FIGURES": str(figures), "EVALS_BENCH_CASES": str(args.cases),
           "EVALS_BENCH_DELAY": str(args.delay), "EVALS_BENCH_CONCURRENCY": str(args.concurrency)}
    if args.postgres:
        env["DATABASE_URL"] = args.postgres
    try:
        code = subprocess.run([PYTHON, "-m", "inspector.launch", "test", "--", "tests/evals/test_overhead.py", "-q",
                               "-p", "no:cacheprovider"], cwd=BASE_DIR, env=env).returncode
        rows = [json.loads(line) for line in figures.read_text().splitlines()]
    finally:
        figures.unlink(missing_ok=True)
    load = os.getloadavg()
    print(f"\nEval overhead: {os.cpu_count()} CPUs, load {load[0]:.2f}; "
          f"{'PostgreSQL' if env.get('DATABASE_URL', '').startswith('postg') else 'SQLite'}")
    for row in rows:
        print(f"  {row['name']:34} {row['value']}")
    return code


if __name__ == "__main__":
    sys.exit(main())
