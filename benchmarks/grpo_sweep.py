"""Tune GRPO's budget before comparing methods: which round size, learning rate and epochs make the
baseline learn on household, stably, within the benchmark's time.

Each configuration is an ordinary `edge bench learning` of GRPO alone (household, test_seen, the
base and the final point only), in its own runs folder; the per-seed warm starts are shared by all
configurations. The configurations are tried in order and the sweep is resumable (finished runs are
skipped). Whatever wins is then used unchanged for every method (params.yaml).

    .venv/bin/python benchmarks/grpo_sweep.py [--seed 0 --seed 1] [--jobs 1] [--only c1]

Writes benchmarks/results/grpo_sweep.{md,json}: per configuration the mean gain of final plain
success over each seed's base, per seed, the mean clip fraction and approx-KL of the last rounds (is
the update stable?), and the runs' own time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import fmean

from edge.benchmarking.learning import LearningBenchConfig, run_benchmark, run_name

ROOT = Path("benchmarks/sweep")
OUT = Path("benchmarks/results")

# name: (rounds, tasks_per_round N, group_size G, lr, epochs, minibatches); c0 is the old default. The
# benchmark's time allows about twice c0's cost per run (7 methods x 5 seeds x 2 environments in ~3 h on
# 2 cores), so the sweep asks first whether 4x the episodes reach +20 points (c1), then what 2x gives.
CONFIGS = {
    "c0": (8, 8, 8, 1e-3, 2, 6),
    "c1": (16, 8, 16, 1e-3, 2, 6),
    "c5": (8, 16, 8, 1e-3, 1, 6),
    "c6": (8, 16, 8, 2e-3, 1, 6),
    "c2": (16, 8, 16, 5e-4, 2, 6),
}


def overrides(config: tuple) -> list[str]:
    rounds, n, g, lr, epochs, minibatches = config
    return [f"train.rounds={rounds}", f"rollout.tasks_per_round={n}", f"rollout.group_size={g}",
            f"grpo.lr={lr}", f"grpo.epochs={epochs}", f"grpo.minibatches={minibatches}"]


def stability(folder: Path, last: int = 4) -> dict:
    """Mean clip fraction, approx-KL and gradient norm over the last ``last`` rounds of a run."""
    rounds = sorted(folder.glob("round_[0-9][0-9][0-9]"))[-last:]
    metrics = [json.loads((r / "train_metrics.json").read_text()) for r in rounds]
    return {k: fmean(m[k] for m in metrics) for k in ("clip_frac", "approx_kl", "grad_norm")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, action="append", help="seeds (default 0 and 1)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", action="append", help="configurations to run (default all)")
    parser.add_argument("--eval-episodes", type=int, default=200)
    args = parser.parse_args()
    seeds = args.seed or [0, 1]
    previous = OUT / "grpo_sweep.json"
    rows = json.loads(previous.read_text()) if previous.exists() else {}
    for name, config in CONFIGS.items():
        if args.only and name not in args.only:
            continue
        rounds = config[0]
        cfg = LearningBenchConfig(envs=["household"], methods=["grpo"], seeds=seeds, eval_episodes=args.eval_episodes,
                                  splits=["test_seen"], eval_every=rounds, intermediate_episodes=None, jobs=args.jobs,
                                  runs_dir=ROOT / name,
                                  out_dir=ROOT / "results", name=f"sweep_{name}", extra=overrides(config),
                                  bases_dir=ROOT / "bases")
        report = run_benchmark(cfg, command=f"benchmarks/grpo_sweep.py --only {name}", track=False)
        runs = report["runs"]["household"]["grpo"]
        gains = {s: r["final"]["test_seen_plain"] - r["curve"][0]["test_seen_plain"] for s, r in runs.items()}
        rows[name] = {
            "overrides": overrides(config), "episodes_per_run": config[0] * config[1] * config[2],
            "base": {s: r["curve"][0]["test_seen_plain"] for s, r in runs.items()},
            "final": {s: r["final"]["test_seen_plain"] for s, r in runs.items()},
            "gain": gains, "mean_gain": fmean(gains.values()),
            "stability": {s: stability(ROOT / name / run_name("household", "grpo", int(s))) for s in runs},
            "run_minutes": fmean(r["run_seconds"] for r in runs.values()) / 60,
        }
        write(rows, seeds, args.eval_episodes)


def write(rows: dict, seeds: list[int], episodes: int) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "grpo_sweep.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["# GRPO budget sweep (household, test_seen)", "",
             f"Seeds {', '.join(map(str, seeds))}, each from its own warm start; {episodes} evaluation episodes at "
             "the base and after the last round. Gain: final plain success minus the seed's base, in points. "
             "Stability: clip fraction / approx-KL over the last 4 rounds, mean over seeds. Command: "
             "`.venv/bin/python benchmarks/grpo_sweep.py`.", "",
             "| config | settings | episodes | base | final | gain (mean) | gain per seed | clip frac | approx KL | "
             "min / run |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        st = list(r["stability"].values())
        lines.append(
            f"| {name} | {' '.join(o.split('.', 1)[1] for o in r['overrides'])} | {r['episodes_per_run']} | "
            f"{fmean(r['base'].values()):.1%} | {fmean(r['final'].values()):.1%} | {100 * r['mean_gain']:+.1f} | "
            + ", ".join(f"s{s} {100 * g:+.1f}" for s, g in r["gain"].items())
            + f" | {fmean(x['clip_frac'] for x in st):.3f} | {fmean(x['approx_kl'] for x in st):.4f} | "
            f"{r['run_minutes']:.1f} |")
    (OUT / "grpo_sweep.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
