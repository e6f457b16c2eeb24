"""Single-process environment throughput: steps per second inside reset/step, per environment and
agent, and end to end (agent included).

    .venv/bin/python benchmarks/env_throughput.py --episodes 500 --seed 0

Writes benchmarks/results/env_throughput.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from rich.console import Console
from rich.table import Table

from edge.benchmarking.env_throughput import measure_env


def measure(env_name: str, policy: str, episodes: int, seed: int) -> dict:
    """One row of the table: ``edge bench perf``'s measurement, keyed by "policy" as this file always was."""
    row = measure_env(env_name, policy, episodes, seed)
    row["policy"] = row.pop("agent")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "env_throughput.json")
    args = parser.parse_args()
    rows = [measure(env, policy, args.episodes, args.seed)
            for env in ("household", "shop") for policy in ("random", "expert")]
    table = Table(title=f"Environment throughput, single process ({platform.processor() or platform.machine()})")
    for col in ("env", "policy", "episodes", "steps", "env steps/s", "end-to-end steps/s", "success"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["env"], r["policy"], str(r["episodes"]), str(r["steps"]),
                      f"{r['env_steps_per_second']:,.0f}", f"{r['end_to_end_steps_per_second']:,.0f}",
                      f"{r['success_rate']:.1%}")
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(),
                                    "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
