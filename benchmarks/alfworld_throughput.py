"""ALFWorld environment throughput with 0 (in-process), 1, 2, ... worker processes.

    ALFWORLD_DATA=../shared/data/alfworld .venv/bin/python benchmarks/alfworld_throughput.py \
        --workers 0 1 2 --episodes 8 --steps 20 --repeats 2

Every setting plays the same ``test_unseen`` games with random admissible actions, all episodes in
lockstep (as rollouts do), for ``--steps`` steps each. Settings alternate over ``--repeats`` rounds,
so a change in the machine's load hits all of them alike. Reported per setting: environment steps
per second of wall time (resets excluded), CPU seconds per step summed over this process and its
workers, and the
load average around the run: on a shared machine other jobs take cores, and wall-clock speed-up from
more workers is bounded by the cores actually free.

Writes benchmarks/results/alfworld_throughput.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table


def cpu_seconds() -> float:
    """User + system time of this process and its live children (the environment workers)."""
    me = psutil.Process()
    return sum(p.cpu_times().user + p.cpu_times().system for p in [me, *me.children(recursive=True)])


def measure(workers: int, episodes: int, steps: int, seed: int) -> dict:
    import edge.envs.alfworld as alfworld
    from edge.envs.parallel import reset_all, step_all

    tasks = alfworld.generate_tasks("test_unseen", episodes, seed)
    envs = [alfworld.make_env(max_steps=steps, workers=workers) for _ in tasks]
    rng = random.Random(seed)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    firsts = reset_all(envs, tasks)  # the first resets in workers also wait for the workers' imports
    reset_seconds = time.perf_counter() - started
    cpu_started, started = cpu_seconds(), time.perf_counter()
    admissible = [first.admissible_actions for first in firsts]
    done = 0
    active = list(range(len(tasks)))
    while active:
        results = step_all([envs[i] for i in active], [rng.choice(admissible[i]) for i in active])
        still = []
        for i, result in zip(active, results):
            admissible[i] = result.info.admissible_actions
            done += 1
            if not result.done:
                still.append(i)
        active = still
    step_seconds = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_started
    alfworld.close_pools()
    return {"workers": workers, "episodes": len(tasks), "steps": done, "reset_seconds": reset_seconds,
            "step_seconds": step_seconds, "steps_per_second": done / step_seconds,
            "cpu_seconds_per_step": cpu / done, "load_before": load_before, "load_after": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "alfworld_throughput.json")
    args = parser.parse_args()
    rows = [measure(w, args.episodes, args.steps, args.seed) for _ in range(args.repeats) for w in args.workers]
    table = Table(title=f"ALFWorld steps/s, {args.episodes} episodes x {args.steps} steps in lockstep, "
                        f"{os.cpu_count()} CPUs")
    for col in ("workers", "steps/s", "CPU s/step", "reset s (all)", "load avg before/after"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["workers"]) if r["workers"] else "0 (in-process)", f"{r['steps_per_second']:.1f}",
                      f"{r['cpu_seconds_per_step']:.3f}", f"{r['reset_seconds']:.1f}",
                      f"{r['load_before']:.1f} / {r['load_after']:.1f}")
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(),
                                    "python": platform.python_version(), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
