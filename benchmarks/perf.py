"""Performance profile and cost of the bank: the same as `edge bench perf` (the logic is in
edge/benchmarking/perf.py), for those who run the benchmarks folder's scripts directly.

    .venv/bin/python benchmarks/perf.py            # default sizes: writes benchmarks/results/perf.md and perf.json
    .venv/bin/python benchmarks/perf.py --quick --no-track --out-dir /tmp/perf

Every option of `edge bench perf --help` is accepted.
"""

from __future__ import annotations

import sys

from edge.cli import app

if __name__ == "__main__":
    app(["bench", "perf", *sys.argv[1:]], prog_name="benchmarks/perf.py")
