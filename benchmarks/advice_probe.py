"""How much does advice in the prompt help a policy, and is the bank's advice as good as an oracle's?

For the base checkpoint and the final checkpoints of a GRPO and an EDGE run of one seed (folders written
by `edge bench learning`), play the same evaluation tasks three times with the same sampling seed:
plain, with the oracle's advice (``edge.guidance.true_advice``: where that kind of object usually lies,
the transformation step; what the warm start taught the policy to follow), and with what the EDGE run's
final bank retrieves. The last columns repeat the three on the tasks for which the bank retrieves
anything (elsewhere "bank" is plain).

    .venv/bin/python benchmarks/advice_probe.py --runs benchmarks/runs --env household --seed 0 --tasks 200

Writes benchmarks/results/advice_probe_<env>_s<seed>.json and prints a table. One sampling seed: at 200
tasks a success rate carries about +-3 points of noise.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from edge.config import EdgeParams
from edge.evaluate import evaluate
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.train import Run
from edge.warmup import true_advice_experience


def probe(runs: Path, env: str, seed: int, n_tasks: int, split: str, sample_seed: int) -> list[dict]:
    edge_run = runs / f"{env}-edge-s{seed}"
    params = EdgeParams.model_validate(json.loads((edge_run / "params.json").read_text()))
    run = Run(params, edge_run)  # read where it is now (Run.open would compare the folder it was made in)
    last = params.train.rounds - 1
    checkpoints = {"base": runs / f"base-{env}",
                   "GRPO final": runs / f"{env}-grpo-s{seed}" / f"round_{last:03d}" / "checkpoint",
                   "EDGE final": edge_run / f"round_{last:03d}" / "checkpoint"}
    tasks = run.eval_tasks(split)[:n_tasks]
    retrieving = [t for t in tasks if run.experience_for(t) is not None]
    rows = []
    for name, folder in checkpoints.items():
        actor = Actor(load_policy(params.policy, checkpoint=folder, seed=seed, envs=[env]))
        row = {"policy": name, "tasks": len(tasks), "retrieving_tasks": len(retrieving)}
        for subset, chosen in (("all", tasks), ("retrieving", retrieving)):
            for condition, advice in (("plain", None), ("oracle", true_advice_experience),
                                      ("bank", run.experience_for)):
                row[f"{subset}_{condition}"] = evaluate(actor, chosen, sample_seed, experience_for=advice).success
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("benchmarks/runs"))
    parser.add_argument("--env", default="household")
    parser.add_argument("--seed", type=int, default=0, help="the benchmark seed whose runs are probed")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--split", default="test_seen")
    parser.add_argument("--sample-seed", type=int, default=7)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the benchmark's runs
    rows = probe(args.runs, args.env, args.seed, args.tasks, args.split, args.sample_seed)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"advice_probe_{args.env}_s{args.seed}.json"
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2) + "\n")
    table = Table(title=f"Advice probe: {args.env} {args.split}, seed {args.seed}, {args.tasks} tasks")
    for col in ("policy", "plain", "oracle advice", "bank", "| retrieving tasks", "plain", "oracle", "bank"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["policy"], *(f"{r[f'all_{k}']:.1%}" for k in ("plain", "oracle", "bank")),
                      str(r["retrieving_tasks"]), *(f"{r[f'retrieving_{k}']:.1%}" for k in ("plain", "oracle", "bank")))
    Console().print(table)
    print(f"written {out}")


if __name__ == "__main__":
    main()
