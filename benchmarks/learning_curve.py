"""Learning curves: train a method for several seeds and tabulate held-out success per round.

    .venv/bin/python benchmarks/learning_curve.py --method grpo --env household --seeds 0 1 2 \\
        --rounds 10 --eval-episodes 400 --eval-every 2

Every seed starts from the same warm-started base (train.base_checkpoint) and is evaluated on the same
test_seen tasks, so per-round differences between methods are paired. Writes
benchmarks/results/curve_<env>_<method>.json and .md, and prints the table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from edge.config import load_params, with_overrides
from edge.train import train


def run_seed(args, seed: int) -> dict:
    overrides = [f"seed={seed}", f"train.method={args.method}", f"train.env={args.env}", f"train.rounds={args.rounds}",
                 f"eval.episodes={args.eval_episodes}", f"eval.every={args.eval_every}",
                 f"train.runs_dir={args.runs_dir}", *args.set]
    params = with_overrides(load_params(args.params), overrides)
    started = time.perf_counter()
    run = train(params)
    wall = time.perf_counter() - started
    curve = {}
    for path in [run.folder / "eval_base.json", *sorted(run.folder.glob("round_*/eval.json"))]:
        data = json.loads(path.read_text())
        split = data[params.eval.splits[0]]
        curve[data["round"]] = {"plain": split["plain"]["success"],
                                "with_bank": split.get("with_bank", {}).get("success")}
    return {"seed": seed, "wall_seconds": wall, "run": str(run.folder), "curve": curve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", default="grpo")
    parser.add_argument("--env", default="household")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--eval-episodes", type=int, default=400)
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--runs-dir", default="benchmarks/runs")
    parser.add_argument("--set", action="append", default=[], help="extra section.key=value overrides")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()

    seeds = [run_seed(args, s) for s in args.seeds]
    rounds = sorted({r for s in seeds for r in s["curve"]}, key=int)
    table = Table(title=f"{args.env} / {args.method}: test_seen success ({args.eval_episodes} episodes per point)")
    table.add_column("round")
    table.add_column("mean plain")
    for s in seeds:
        table.add_column(f"seed {s['seed']}")
    rows = []
    for r in rounds:
        values = [s["curve"][r]["plain"] for s in seeds if r in s["curve"]]
        banked = [s["curve"][r]["with_bank"] for s in seeds
                  if r in s["curve"] and s["curve"][r]["with_bank"] is not None]
        rows.append({"round": int(r), "plain_mean": statistics.mean(values), "plain": values,
                     "with_bank_mean": statistics.mean(banked) if banked else None})
        table.add_row("base" if int(r) < 0 else str(r), f"{statistics.mean(values):.1%}",
                      *[f"{s['curve'][r]['plain']:.1%}" + (f" / {s['curve'][r]['with_bank']:.1%}"
                                                           if s["curve"][r]["with_bank"] is not None else "")
                        for s in seeds if r in s["curve"]])
    Console().print(table)
    walls = ", ".join(f"seed {s['seed']}: {s['wall_seconds'] / 60:.1f} min" for s in seeds)
    Console().print(f"wall time per run: {walls}  ({platform.processor() or platform.machine()})")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"curve_{args.env}_{args.method}"
    result = {"method": args.method, "env": args.env, "eval_episodes": args.eval_episodes, "rows": rows,
              "seeds": seeds, "machine": platform.platform()}
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# {args.env} / {args.method}: test_seen success, {args.eval_episodes} episodes per point", "",
             "| round | mean plain | " + " | ".join(f"seed {s['seed']}" for s in seeds) + " |",
             "|---|---|" + "---|" * len(seeds)]
    for row in rows:
        lines.append(f"| {'base' if row['round'] < 0 else row['round']} | {row['plain_mean']:.1%} | "
                     + " | ".join(f"{v:.1%}" for v in row["plain"]) + " |")
    lines += ["", f"Wall time per run: {walls}."]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
