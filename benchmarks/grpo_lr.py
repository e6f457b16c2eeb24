"""GRPO's learning rate, tuned at the benchmark's budget, and the oracle control's lead at each rate.

The budget sweep (docs/benchmark-budget.md) chose 16 tasks x 8 members, one epoch of 6 minibatches a round at
lr 1e-3, and left its row at lr 2e-3 unrun. At that budget a round moves the policy little (approx-KL 0.006 a
round) and the oracle control's distillation KL stays at 0.1-0.55 a state after each round's update: if GRPO
learns more at another rate, the baseline was under-tuned; if the scaffold's transfer is limited by how far six
steps can move the plain policy, a higher rate should widen the control's lead. Both methods run at the new rate
from the benchmark's warm starts (N = 30), on the same tasks and evaluation streams as the sweep's runs (and both
again at lr 5e-4 the same way: --runs-dir and --out-dir benchmarks/sweep/lr05, grpo.lr=0.0005):

    .venv/bin/edge bench learning --env household --method grpo --method edge-oracle-bank --seed 0 ... --seed 4 \\
        --split test_seen --eval-episodes 400 --eval-every 10000 --jobs 2 --runs-dir benchmarks/sweep/lr2 \\
        --bases-dir benchmarks/sweep/bases --out-dir benchmarks/sweep/lr2 --name learning_lr2 --no-track \\
        --set grpo.lr=0.002 --set eval.base_cache_dir=benchmarks/sweep/internalization/base-evals \\
        --set bank.conditioned_pg=own-and-plain --set distill.anchor=1.0 --set distill.states=both \\
        --set bank.rho_schedule=handoff --set bank.handoff_round=4

(the oracle control is row o26 of the internalization sweep; GRPO reads none of its fields). Then this script
reads those runs beside the reference ones (GRPO in benchmarks/runs, o26 in the sweep) and pairs them by seed
and task:

    .venv/bin/python benchmarks/grpo_lr.py --runs benchmarks/sweep/lr2 --runs benchmarks/sweep/lr05 \\
        --seed 0 ... --seed 4

Writes benchmarks/results/grpo_lr.{md,json} (``--name N``: grpo_lr_N.{md,json}).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's run folders
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.learning import paired_difference, read_run, run_name  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.config import EdgeParams, ignored_settings  # noqa: E402
from edge.runs import read_run_params  # noqa: E402
from edge.tracking import flatten  # noqa: E402

REFERENCE_RUNS = Path("benchmarks/runs")
SPLIT = "test_seen"
ORACLE_ROW = "o26"


IGNORED = ("grpo.lr", "train.runs_dir", "train.run_name", "eval.intermediate_episodes")
"""Fields a run at another rate may differ in from its reference: the rate, where it lives, and the
intermediate evaluations' size (none are made: the runs evaluate after the last round only)."""


def recorded(run: Path) -> EdgeParams:
    """A run's recorded settings, with the fields added since it was written at their defaults (``read_run_params``)."""
    return read_run_params(run)


def check_only_the_rate_differs(run: Path, ours: EdgeParams, reference: Path, theirs: EdgeParams) -> None:
    """Refuse a pair whose settings differ in anything but ``IGNORED`` and the fields its method never reads
    (``ignored_settings``: GRPO reads no bank or distillation field), naming the fields: the comparison is
    about the rate alone."""
    a, b = (flatten(p.model_dump(mode="json")) for p in (ours, theirs))
    unread = set(ignored_settings(ours)) | set(ignored_settings(theirs))
    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k not in IGNORED and k not in unread)
    if differ:
        raise ValueError(f"{run} differs from {reference} in more than grpo.lr: "
                         + ", ".join(f"{k} ({a.get(k)} against {b.get(k)})" for k in differ))


def series(folders: list[Path], seeds: list[int]) -> dict[str, dict[int, dict]]:
    """GRPO and the oracle control at the reference rate, and each of ``folders``' methods at its rate, by seed
    (a folder's oracle runs only where it has them for every seed)."""
    where = {"GRPO": lambda s: sweep.run_folder(sweep.GRPO, s, REFERENCE_RUNS),
             "oracle (o26)": lambda s: sweep.run_folder(ORACLE_ROW, s, REFERENCE_RUNS)}
    for folder in folders:
        rate = recorded(folder / run_name("household", "grpo", seeds[0])).grpo.lr
        where[f"GRPO, lr {rate:g}"] = lambda s, f=folder: f / run_name("household", "grpo", s)
        if all((folder / run_name("household", sweep.ORACLE, s) / "params.json").exists() for s in seeds):
            where[f"oracle (o26), lr {rate:g}"] = lambda s, f=folder: f / run_name("household", sweep.ORACLE, s)
    params = {name: {s: recorded(at(s)) for s in seeds} for name, at in where.items()}
    for name, at in where.items():
        reference = "GRPO" if name.startswith("GRPO") else "oracle (o26)"
        for s in seeds:
            check_only_the_rate_differs(at(s), params[name][s], where[reference](s), params[reference][s])
    return {name: {s: read_run(at(s), [SPLIT]) | {"lr": params[name][s].grpo.lr} for s in seeds}
            for name, at in where.items()}


def pairs_of(names: list[str]) -> list[tuple[str, str]]:
    """(ours, theirs): the control's lead at the reference rate; each other rate's effect on GRPO; and where the
    control ran at that rate, its lead there and its change against itself at the reference rate."""
    pairs = [("oracle (o26)", "GRPO")]
    for name in names:
        if name.startswith("GRPO, lr "):
            rate = name.removeprefix("GRPO, lr ")
            pairs.append((name, "GRPO"))
            if f"oracle (o26), lr {rate}" in names:
                pairs += [(f"oracle (o26), lr {rate}", name), (f"oracle (o26), lr {rate}", "oracle (o26)")]
    return pairs


def compare(by_series: dict, seeds: list[int]) -> dict:
    def plain(name, s):
        return by_series[name][s]["final"][f"{SPLIT}_plain"]

    def tasks(name, s):
        return by_series[name][s]["final_tasks"][SPLIT]["plain"]

    rows = {name: {"lr": sorted({r["lr"] for r in runs.values()}), "plain": fmean(plain(name, s) for s in seeds),
                   "with_advice": (fmean(runs[s]["final"][f"{SPLIT}_with_bank"] for s in seeds)
                                   if all(runs[s]["final"].get(f"{SPLIT}_with_bank") is not None for s in seeds)
                                   else None)}
            for name, runs in by_series.items()}
    pairs = [{"ours": a, "theirs": b,
              "plain": paired_difference([plain(a, s) for s in seeds], [plain(b, s) for s in seeds], seeds,
                                         [(tasks(a, s), tasks(b, s)) for s in seeds])}
             for a, b in pairs_of(list(by_series))]
    return {"series": rows, "pairs": pairs}


def _diff(d: dict) -> str:
    return f"{100 * d['mean']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}] (p {d['p_value']:.3f})"


def report(result: dict, seeds: list[int], command: str) -> str:
    lines = ["# GRPO's learning rate at the benchmark's budget, and the oracle control's lead at each rate", "",
             __doc__.split("\n\n")[1].replace("\n", " "), "",
             f"Seeds {seeds}; household `{SPLIT}`, 400 tasks a seed; {describe_machine()}; command: `{command}`.", "",
             "| series | grpo.lr | plain | with the advice |", "| --- | --- | --- | --- |"]
    for name, r in result["series"].items():
        advice = "–" if r["with_advice"] is None else f"{r['with_advice']:.1%}"
        lines.append(f"| {name} | {', '.join(f'{x:g}' for x in r['lr'])} | {r['plain']:.1%} | {advice} |")
    lines += ["", "Paired by seed and task, final plain success (points; Student-t interval over seeds, exact "
              "sign-flip p):", "", "| ours | − theirs | plain | per seed |", "| --- | --- | --- | --- |"]
    for p in result["pairs"]:
        per = " ".join(f"s{s} {100 * v:+.1f}" for s, v in p["plain"]["per_seed"].items())
        lines.append(f"| {p['ours']} | {p['theirs']} | {_diff(p['plain'])} | {per} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, action="append", required=True,
                        help="a folder of runs at another rate (edge bench learning's); repeat for several")
    parser.add_argument("--seed", type=int, action="append", required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--name", help="writes grpo_lr_NAME.{md,json} instead of grpo_lr.{md,json}")
    args = parser.parse_args(argv)
    result = compare(series(args.runs, args.seed), args.seed)
    command = "benchmarks/grpo_lr.py " + " ".join([f"--runs {r}" for r in args.runs]
                                                   + [f"--seed {s}" for s in args.seed]
                                                   + ([f"--name {args.name}"] if args.name else []))
    stem = f"grpo_lr_{args.name}" if args.name else "grpo_lr"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps({"seeds": args.seed, "command": command,
                                                       "machine": describe_machine()} | result, indent=2))
    text = report(result, args.seed, command)
    (args.out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
