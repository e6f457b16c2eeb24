"""How much does advice in the prompt help a policy, and is the bank's advice as good as an oracle's?

For the base checkpoint and the final checkpoints of a GRPO and an EDGE run of one seed (folders written
by `edge bench learning`), play the same evaluation tasks three times with the same sampling seed:
plain, with the oracle's advice (``edge.guidance.true_advice``: where that kind of object usually lies,
the transformation step; what the warm start taught the policy to follow), and with what the EDGE run's
final bank retrieves, in the run's own ``bank.block_order`` and in the other order ("bank,
reordered": similarity <-> episode, the same entries). The last columns repeat them on the tasks for
which the bank retrieves anything (elsewhere "bank" is plain). ``--edge-runs`` takes the EDGE run from
another folder (a sweep configuration's) than the GRPO run.

    .venv/bin/python benchmarks/advice_probe.py --runs benchmarks/runs --env household --seed 0 --seed 1 --tasks 200

Writes benchmarks/results/advice_probe_<env>_s<seed>.json per seed and prints a table; with several
seeds also ``advice_probe_<env>.json``: per seed and on average, the bank's lift over plain next to the
oracle's (on all tasks and on the retrieving ones, for each policy) and the share of the EDGE run's
training groups that retrieved anything. One sampling seed: at 200 tasks a success rate carries about
+-3 points of noise.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from edge.config import run_params
from edge.evaluate import evaluate
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.train import Run
from edge.warmup import true_advice_experience


def base_folder(runs: Path, bases: Path, env: str, seed: int) -> Path:
    """The run's warm start: the benchmark's per-seed base, else a shared one."""
    for folder in (bases / f"base-{env}-s{seed}", bases / f"base-{env}", runs / f"base-{env}-s{seed}"):
        if folder.exists():
            return folder
    raise FileNotFoundError(f"no warm start base-{env}-s{seed} or base-{env} in {bases}")


def training_retrieval(edge_run: Path) -> float:
    """Share of the run's training groups (all rounds but the first, whose bank is empty) that retrieved."""
    rates = [json.loads(p.read_text())["summary"]["retrieval_hit_rate"]
             for p in sorted(edge_run.glob("round_*/scores.json"))[1:]]
    return sum(rates) / len(rates) if rates else 0.0


def probe(runs: Path, env: str, seed: int, n_tasks: int, split: str, sample_seed: int,
          bases: Path | None = None, edge_runs: Path | None = None) -> list[dict]:
    edge_run = (edge_runs or runs) / f"{env}-edge-s{seed}"
    recorded = json.loads((edge_run / "params.json").read_text())
    params = run_params(recorded)
    run = Run(params, edge_run)  # read where it is now (Run.open would compare the folder it was made in)
    other = "similarity" if params.bank.block_order == "episode" else "episode"
    reordered = Run(run_params({**recorded, "bank": {**recorded["bank"], "block_order": other}}),
                    edge_run)
    last = params.train.rounds - 1
    checkpoints = {"base": base_folder(runs, bases or runs, env, seed),
                   "GRPO final": runs / f"{env}-grpo-s{seed}" / f"round_{last:03d}" / "checkpoint",
                   "EDGE final": edge_run / f"round_{last:03d}" / "checkpoint"}
    tasks = run.eval_tasks(split)[:n_tasks]
    retrieving = [t for t in tasks if run.experience_for(t) is not None]
    rows = []
    for name, folder in checkpoints.items():
        actor = Actor(load_policy(params.policy, checkpoint=folder, seed=seed, envs=[env]))
        row = {"policy": name, "tasks": len(tasks), "retrieving_tasks": len(retrieving),
               "training_groups_retrieving": training_retrieval(edge_run), "block_order": params.bank.block_order,
               "reordered": other}
        for subset, chosen in (("all", tasks), ("retrieving", retrieving)):
            for condition, advice in (("plain", None), ("oracle", true_advice_experience),
                                      ("bank", run.experience_for), ("bank_reordered", reordered.experience_for)):
                row[f"{subset}_{condition}"] = evaluate(actor, chosen, sample_seed, experience_for=advice).success
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("benchmarks/runs"))
    parser.add_argument("--env", default="household")
    parser.add_argument("--seed", type=int, action="append", help="a benchmark seed whose runs are probed (repeat)")
    parser.add_argument("--bases", type=Path, default=None, help="where the warm starts are (default: --runs)")
    parser.add_argument("--edge-runs", type=Path, default=None,
                        help="where the EDGE runs are (default: --runs; GRPO's are always in --runs)")
    parser.add_argument("--name", default=None, help="results file stem (default advice_probe_<env>)")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--split", default="test_seen")
    parser.add_argument("--sample-seed", type=int, default=7)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the benchmark's runs
    seeds = args.seed or [0]
    stem = args.name or f"advice_probe_{args.env}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    by_seed = {}
    for seed in seeds:
        out = args.out_dir / f"{stem}_s{seed}.json"
        rows = earlier_rows(out, args)
        if rows is None:
            rows = probe(args.runs, args.env, seed, args.tasks, args.split, args.sample_seed, args.bases,
                         args.edge_runs)
            out.write_text(json.dumps({"args": recorded_args(args), "rows": rows}, indent=2) + "\n")
        else:
            print(f"seed {seed}: read from {out} (probed before with the same runs, tasks and streams)")
        by_seed[seed] = rows
        table = Table(title=f"Advice probe: {args.env} {args.split}, seed {seed}, {args.tasks} tasks; training "
                            f"groups retrieving {rows[0]['training_groups_retrieving']:.0%}")
        for col in ("policy", "plain", "oracle advice", f"bank ({rows[0]['block_order']})",
                    f"bank ({rows[0]['reordered']})", "| retrieving tasks", "plain", "oracle", "bank", "reordered"):
            table.add_column(col, justify="right")
        for r in rows:
            conditions = ("plain", "oracle", "bank", "bank_reordered")
            table.add_row(r["policy"], *(f"{r[f'all_{k}']:.1%}" for k in conditions),
                          str(r["retrieving_tasks"]), *(f"{r[f'retrieving_{k}']:.1%}" for k in conditions))
        Console().print(table)
        print(f"written {out}")
    if len(seeds) > 1:
        summary = lifts(by_seed)
        out = args.out_dir / f"{stem}.json"
        out.write_text(json.dumps({"args": recorded_args(args), "summary": summary,
                                   "by_seed": by_seed}, indent=2) + "\n")
        table = Table(title=f"Advice lift over plain, mean of seeds {seeds} (points)")
        for col in ("policy", "subset", "oracle lift", "bank lift", "bank / oracle", "reordered lift",
                    "reordered / oracle"):
            table.add_column(col, justify="right")
        def share(ratio: float | None) -> str:
            return f"{ratio:.0%}" if ratio is not None else "-"

        for row in summary["rows"]:
            table.add_row(row["policy"], row["subset"], f"{100 * row['oracle_lift']:+.1f}",
                          f"{100 * row['bank_lift']:+.1f}", share(row["ratio"]),
                          f"{100 * row['reordered_lift']:+.1f}", share(row["reordered_ratio"]))
        Console().print(table)
        print(f"training groups retrieving: {summary['training_groups_retrieving']:.1%}; written {out}")


PROBE_ARGS = ("runs", "env", "bases", "edge_runs", "tasks", "split", "sample_seed")
"""What a seed's rows depend on besides the seed: a seed's file written with the same values is reused."""


def recorded_args(args: argparse.Namespace) -> dict[str, str]:
    """The command line as the results files record it (and ``earlier_rows`` compares it)."""
    return {k: str(v) for k, v in vars(args).items()}


def earlier_rows(out: Path, args: argparse.Namespace) -> list[dict] | None:
    """The rows of a seed probed before (``out``) with the same ``PROBE_ARGS``, else None: an interrupted
    or split-up probe resumes, and several seeds probed in parallel invocations can be summarised by one
    more invocation over all of them."""
    if not out.exists():
        return None
    earlier, now = json.loads(out.read_text()), recorded_args(args)
    same = all(earlier.get("args", {}).get(k) == now[k] for k in PROBE_ARGS)
    return earlier["rows"] if same else None


def lifts(by_seed: dict[int, list[dict]]) -> dict:
    """Mean over seeds of (oracle - plain) and (bank - plain) per policy and subset, and their ratio."""
    rows = []
    policies = [r["policy"] for r in next(iter(by_seed.values()))]
    for policy in policies:
        for subset in ("all", "retrieving"):
            picked = [next(r for r in rows_ if r["policy"] == policy) for rows_ in by_seed.values()]
            oracle = sum(r[f"{subset}_oracle"] - r[f"{subset}_plain"] for r in picked) / len(picked)
            bank = sum(r[f"{subset}_bank"] - r[f"{subset}_plain"] for r in picked) / len(picked)
            other = sum(r[f"{subset}_bank_reordered"] - r[f"{subset}_plain"] for r in picked) / len(picked)
            rows.append({"policy": policy, "subset": subset, "oracle_lift": oracle, "bank_lift": bank,
                         "ratio": bank / oracle if oracle > 0 else None, "reordered_lift": other,
                         "reordered_ratio": other / oracle if oracle > 0 else None,
                         "block_order": picked[0]["block_order"]})
    retrieving = [rows_[0]["training_groups_retrieving"] for rows_ in by_seed.values()]
    return {"rows": rows, "training_groups_retrieving": sum(retrieving) / len(retrieving)}


if __name__ == "__main__":
    main()
