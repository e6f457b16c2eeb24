"""Single-process environment throughput: steps per second inside reset/step, per environment and
agent, and end to end (agent included).

    .venv/bin/python benchmarks/env_throughput.py --episodes 500 --seed 0

Writes benchmarks/results/env_throughput.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from edge.envs.play import play_episode
from edge.envs.registry import generate_tasks, make_agent, make_env


def measure(env_name: str, policy: str, episodes: int, seed: int) -> dict:
    tasks = generate_tasks(env_name, "train", episodes, seed)
    env, agent = make_env(env_name), make_agent(env_name, policy, seed)
    play_episode(env, agent, tasks[0])  # warm caches (imports, search index) outside the clock
    started = time.perf_counter()
    results = [play_episode(env, agent, task) for task in tasks]
    wall = time.perf_counter() - started
    steps = sum(r.steps for r in results)
    env_seconds = sum(r.env_seconds for r in results)
    return {"env": env_name, "policy": policy, "episodes": episodes, "steps": steps,
            "env_steps_per_second": steps / env_seconds, "end_to_end_steps_per_second": steps / wall,
            "success_rate": sum(r.won for r in results) / episodes}


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
