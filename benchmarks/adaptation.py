"""After the world changed: does a policy that internalized the scaffold adapt worse than GRPO's?

The paper leaves open whether experience internalized into the weights hurts adaptation when the world
changes. Here each seed's final policies of shared_settings.py's ``experts`` setting (N = 150 competent
demonstrations in the warm start; trained on the usual household at the default budget): GRPO's, the oracle
control's (o23's update) and EDGE's (e22's bank), are each trained on with plain GRPO, the default budget again,
on ``household_moved``: the same tasks with every object kind lying mostly elsewhere. What each policy
learnt about where things lie is now wrong; the one that internalized the oracle's advice learnt it most
firmly. Every start is evaluated on the moved world before its first round (how much its knowledge costs
there), after round 3 (how fast it adapts) and after the last round, on the same 400 tasks and streams of
its seed, so starts are paired by seed and, within a seed, by task.

    .venv/bin/python benchmarks/adaptation.py --seed 0 ... [--report-only]

The runs go to benchmarks/sweep/adaptation/<start>/runs (``edge bench learning``, resumable); each start's
warm starts are links to the final checkpoints of the ``experts`` runs. Writes
benchmarks/results/adaptation.{md,json} and adaptation.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared settings' runs and helpers
import shared_settings as shared  # noqa: E402

from edge.benchmarking.learning import (  # noqa: E402
    LearningBenchConfig,
    paired_difference,
    read_run,
    run_benchmark,
)
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.stats import t_interval_mean  # noqa: E402
from edge.envs.household.knowledge import FIND_OPENING  # noqa: E402
from edge.envs.household.world import OBJECT_KINDS, kind_of, likely_kinds  # noqa: E402
from edge.plots import curves_plot  # noqa: E402
from edge.rollout import read_rollouts  # noqa: E402

SOURCE = "experts"
"""The shared setting whose final policies start the runs (trained on the usual household)."""
STARTS = {"grpo": "GRPO", shared.sweep.ORACLE: "oracle control (o23)", "edge": "EDGE (e22)"}
"""Which of the source's final policies start a run, and how the tables name them; GRPO's is the baseline."""
BASELINE = "grpo"
ROOT = shared.ROOT / "adaptation"
SPLIT = shared.SPLIT
AFTER_ROUND = 3
"""The intermediate evaluation (``eval_every`` 4: after rounds 3 and 7)."""


def source_checkpoint(start: str, seed: int) -> Path:
    """The final checkpoint of the source's run of ``start`` at ``seed`` (it must have finished)."""
    folder = shared.run_folder(SOURCE, start, seed)
    if not shared.finished(folder):
        raise ValueError(f"{folder} has not finished: run `benchmarks/shared_settings.py --setting {SOURCE} "
                         f"--seed {seed} --oracle --edge` first")
    checkpoint = sorted(folder.glob("round_[0-9][0-9][0-9]"))[-1] / "checkpoint"
    if not (checkpoint / "edge_manifest.json").exists():  # the benchmark would take the link for a warm start to build
        raise ValueError(f"{checkpoint} is not a sealed checkpoint (no edge_manifest.json)")
    return checkpoint


def bases_dir(start: str) -> Path:
    return ROOT / start / "bases"


def link_warm_starts(start: str, seeds: list[int]) -> None:
    """Each seed's warm start is the source's final policy: a link named as the benchmark looks for it."""
    for seed in seeds:
        link = bases_dir(start) / f"base-{shared.MOVED_ENV}-s{seed}"
        target = source_checkpoint(start, seed).resolve()
        if link.is_symlink() and link.resolve() != target:
            raise ValueError(f"{link} points to {link.resolve()}, not {target}: remove it to start again")
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target, target_is_directory=True)


def bench_config(start: str, seeds: list[int], jobs: int) -> LearningBenchConfig:
    """Plain GRPO on the moved household from ``start``'s final policies, the source's settings otherwise."""
    return LearningBenchConfig(envs=[shared.MOVED_ENV], methods=[BASELINE], seeds=seeds, splits=[SPLIT], jobs=jobs,
                               runs_dir=ROOT / start / "runs", out_dir=ROOT / start, name=f"learning_after_{start}",
                               bases_dir=bases_dir(start), extra=list(shared.SETTINGS[SOURCE]))


def run_folder(start: str, seed: int) -> Path:
    return ROOT / start / "runs" / shared.run_name(shared.MOVED_ENV, BASELINE, seed)


def point(run: dict, round_: int) -> float:
    """Plain success at evaluation ``round_`` (-1: before the first round)."""
    return next(p[f"{SPLIT}_plain"] for p in run["curve"] if p["round"] == round_)


def first_searches(folders: list[Path], rounds: tuple[int, ...] = (0, AFTER_ROUND, 7)) -> dict[str, dict]:
    """Where the plain training episodes of each of ``rounds`` (pooled over ``folders``) look first: the
    share of first ``go to`` moves to a receptacle kind where the task's object usually lay (the usual
    world's likely kinds present in the room) and to one where it lies now (the moved world's). How fast
    what the policy knew gives way to what is true."""
    out = {}
    for k in rounds:
        counts = {"usual": 0, "moved": 0, "episodes": 0}
        for folder in folders:
            for traj in read_rollouts(folder / f"round_{k:03d}" / "rollouts.parquet", text_only=True):
                goes = [a for a in (step.decision.action for step in traj.steps) if a.startswith("go to ")]
                if traj.conditioned or not goes:
                    continue
                obj, present = traj.task.spec["goal"]["object"], {kind_of(r) for r in traj.task.spec["receptacles"]}
                first = kind_of(goes[0][len("go to "):])
                counts["episodes"] += 1
                for world in ("usual", "moved"):
                    counts[world] += first in set(likely_kinds(obj, world)) & present
        n = counts["episodes"]
        out[str(k)] = {"usual": counts["usual"] / n, "moved": counts["moved"] / n, "episodes": n} if n else {}
    return out


def report(seeds: list[int]) -> dict:
    """Per start: success on the moved world before, after round 3 and at the end, and each against GRPO's
    start (paired by seed; by task too where the evaluation kept its outcomes)."""
    runs = {start: {s: read_run(run_folder(start, s), [SPLIT]) for s in seeds} for start in STARTS}
    before_tasks = {start: {s: json.loads((run_folder(start, s) / "eval_base.json").read_text())[SPLIT]
                            ["plain"].get("won_by_task") for s in seeds} for start in STARTS}
    usual = {start: {s: shared.final(read_run(shared.run_folder(SOURCE, start, s), [SPLIT]), "plain")
                     for s in seeds} for start in STARTS}
    rows = {}
    for start, by_seed in runs.items():
        values = {"usual_final": [usual[start][s] for s in seeds], "before": [point(by_seed[s], -1) for s in seeds],
                  "after_round": [point(by_seed[s], AFTER_ROUND) for s in seeds],
                  "final": [shared.final(by_seed[s], "plain") for s in seeds]}
        row = {k: t_interval_mean(v).to_dict() for k, v in values.items()}
        if start != BASELINE:
            base = runs[BASELINE]
            row["usual_final_minus_grpo"] = paired_difference(values["usual_final"],
                                                              [usual[BASELINE][s] for s in seeds], seeds)
            row["before_minus_grpo"] = paired_difference(
                values["before"], [point(base[s], -1) for s in seeds], seeds,
                [(before_tasks[start][s], before_tasks[BASELINE][s]) for s in seeds])
            row["after_round_minus_grpo"] = paired_difference(
                values["after_round"], [point(base[s], AFTER_ROUND) for s in seeds], seeds)
            row["final_minus_grpo"] = paired_difference(
                values["final"], [shared.final(base[s], "plain") for s in seeds], seeds,
                [(shared.outcomes(by_seed[s], "plain"), shared.outcomes(base[s], "plain")) for s in seeds])
        row["curve"] = {str(s): [(p["round"] + 1, p[f"{SPLIT}_plain"]) for p in by_seed[s]["curve"]] for s in seeds}
        row["first_search"] = first_searches([run_folder(start, s) for s in seeds])
        rows[start] = row
    return rows


def bank_places(folder: Path) -> dict:
    """What a run's final bank says about where objects lie: of the places its active find entries name
    (``try : look for <object> in <kind> , <kind> .``), the share where the object usually lay and the share
    where it lies in the moved world. Does the bank learn what changed?"""
    last = sorted(folder.glob("round_[0-9][0-9][0-9]"))[-1]
    named = {"usual": 0, "moved": 0, "places": 0, "entries": 0}
    for entry in pq.read_table(last / "bank.parquet", columns=["text", "status"]).to_pylist():
        if entry["status"] != "active" or not entry["text"].startswith(FIND_OPENING):
            continue
        obj, _, kinds = entry["text"].removeprefix(FIND_OPENING).removesuffix(" .").partition(" in ")
        if obj not in OBJECT_KINDS:  # where a lamp stands: the same in both worlds
            continue
        places = kinds.split(" , ")
        named["entries"] += 1
        named["places"] += len(places)
        for world in ("usual", "moved"):
            named[world] += sum(p in likely_kinds(obj, world) for p in places)
    return named


def from_warm_start(seeds: list[int]) -> dict:
    """The same reading of the runs that start on the moved world from the warm start (shared_settings.py's
    ``moved150``: GRPO, and the oracle control and EDGE with their scaffolds), where they have finished."""
    out = {}
    for method in STARTS:
        folders = [shared.run_folder("moved150", method, s) for s in seeds]
        if all(shared.finished(f) for f in folders):
            out[method] = first_searches(folders)
            if method == "edge":
                banks = [bank_places(f) for f in folders]
                out["edge_bank"] = {k: sum(b[k] for b in banks) for k in banks[0]}
    return out


def markdown(result: dict) -> str:
    pct, diff = shared.pct, shared.diff  # the shared settings' table cells
    rows = result["rows"]
    lines = ["# After the world changed: GRPO on the moved household from each method's final policy", "",
             " ".join(__doc__.split("\n\n")[1].split()), "",
             f"Seeds {result['seeds']}; household_moved {SPLIT}, 400 tasks a seed (200 after round {AFTER_ROUND}); "
             f"{result['machine']}; command: `{result['command']}`.", "",
             "Plain success, mean over seeds; differences in points against GRPO's start, paired by seed, Student-t "
             "95% interval and the exact permutation p-value.", "",
             f"| start | on the usual household (before the change) | moved, before training | after round "
             f"{AFTER_ROUND} | after the last round |", "| --- | --- | --- | --- | --- |"]
    for start, name in STARTS.items():
        row = rows[start]
        lines.append(f"| {name} | {pct(row['usual_final'])} | {pct(row['before'])} | {pct(row['after_round'])} "
                     f"| {pct(row['final'])} |")
    lines += ["", "| start − GRPO's | usual household | moved, before training | after round "
              f"{AFTER_ROUND} | after the last round | per seed, last round |", "| --- | --- | --- | --- | --- | --- |"]
    for start, name in STARTS.items():
        if start == BASELINE:
            continue
        row = rows[start]
        per_seed = " ".join(f"s{s} {100 * d:+.1f}" for s, d in row["final_minus_grpo"]["per_seed"].items())
        lines.append(f"| {name} | {diff(row['usual_final_minus_grpo'])} | {diff(row['before_minus_grpo'])} "
                     f"| {diff(row['after_round_minus_grpo'])} | {diff(row['final_minus_grpo'])} | {per_seed} |")
    lines += ["", "Where the first search goes: of the plain training episodes of a round (all seeds), the share "
              "whose first `go to` heads to a receptacle kind where the task's object usually lay, and to one "
              "where it lies now (each the kinds present in the room). Rounds of GRPO after the change, from each "
              "final policy, and, for comparison, the runs on the moved world from the warm start "
              "(shared_settings.py's `moved150`, each method with its own scaffold).", "",
              "| runs | round 0: usual / moved | round 3 | round 7 |", "| --- | --- | --- | --- |"]

    def cells(searches: dict) -> str:
        return " | ".join(f"{v['usual']:.0%} / {v['moved']:.0%}" if (v := searches.get(k)) else "–"
                          for k in ("0", str(AFTER_ROUND), "7"))

    for start, name in STARTS.items():
        lines.append(f"| GRPO from {name}'s final policy | {cells(rows[start]['first_search'])} |")
    searched = {k: v for k, v in result.get("from_warm_start", {}).items() if k in STARTS}
    for method, searches in searched.items():
        lines.append(f"| {STARTS[method]} from the warm start (moved150) | {cells(searches)} |")
    if bank := result.get("from_warm_start", {}).get("edge_bank"):
        lines += ["", f"EDGE's final banks on the moved world (moved150, all seeds): {bank['entries']} active entries "
                  f"say where an object lies, naming {bank['places']} places; {bank['moved'] / bank['places']:.0%} are "
                  f"where the object lies now, {bank['usual'] / bank['places']:.0%} where it usually lay before."]
    return "\n".join(lines) + "\n"


def figure(result: dict, path: Path) -> Path:
    """Mean plain success on the moved household against rounds of GRPO after the change, one line a start."""
    curves = {}
    for start, name in STARTS.items():
        by_seed = list(result["rows"][start]["curve"].values())
        rounds = [r for r, _ in by_seed[0]]
        curves[f"from {name}"] = [(r, sum(c[i][1] for c in by_seed) / len(by_seed), None)
                                  for i, r in enumerate(rounds)]
    return curves_plot(curves, path, f"household_moved {SPLIT}, {len(result['seeds'])} seeds",
                       xlabel="rounds of GRPO after the change", ylabel=f"{SPLIT} success (mean over seeds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, action="append", required=True)
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel, one torch thread each")
    parser.add_argument("--report-only", action="store_true", help="train nothing: tables from finished runs")
    args = parser.parse_args()
    if not args.report_only:
        for start in STARTS:
            link_warm_starts(start, args.seed)
            run_benchmark(bench_config(start, args.seed, args.jobs), track=False)
    command = "benchmarks/adaptation.py " + " ".join(f"--seed {s}" for s in args.seed)
    result = {"seeds": args.seed, "machine": describe_machine(), "command": command, "rows": report(args.seed),
              "from_warm_start": from_warm_start(args.seed)}
    shared.sweep.OUT.mkdir(parents=True, exist_ok=True)
    (shared.sweep.OUT / "adaptation.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    (shared.sweep.OUT / "adaptation.md").write_text(markdown(result))
    figure(result, shared.sweep.OUT / "adaptation.png")
    print(markdown(result))


if __name__ == "__main__":
    main()
