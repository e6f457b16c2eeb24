"""Does the plain policy keep *what* the advice says, or something general?

The oracle's advice on the household names where the task's object kind usually lies ("look for apple in
fridge, countertop"). That is knowledge about one kind: a plain policy can learn it by heart only for the
kinds its training tasks were about while the scaffold was on. If the scaffold's lasting gain over GRPO is
that knowledge, it should sit on the evaluation tasks whose object kind the scaffolded rounds trained on, and
the advice should be worth less there at the end (it says what the plain policy already knows).

Per seed, for a finished configuration of the internalization sweep and GRPO's reference run of the same
seed (same warm start, same training tasks: the round's tasks depend on the seed only), the evaluation tasks
are split by how many training tasks with conditioned members (every task of the oracle's rows while the
scaffold is on; none after a ``handoff``) had the same object kind: 0, 1, 2, 3 or more. For each bucket:
plain - GRPO and (with the advice) - plain, each over the bucket's tasks of every seed; and, per seed, the
gain on trained kinds minus the gain on untrained ones, with its Student-t interval over seeds. Reads finished
runs only (each round's rollouts for the trained tasks, the last round's evaluation for the outcomes):

    .venv/bin/python benchmarks/kind_coverage.py --config o26 --seed 0 ... [--seed 9] [--config o23]

Writes benchmarks/results/kind_coverage.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from statistics import fmean

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's run folders
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.stats import t_interval_mean  # noqa: E402
from edge.envs.registry import generate_tasks  # noqa: E402

REFERENCE_RUNS = Path("benchmarks/runs")
SPLIT = "test_seen"
BUCKETS = ("0", "1", "2", "3+")
OUT = Path("benchmarks/results")


def bucket(count: int) -> str:
    return BUCKETS[min(count, 3)]


def object_kind(task_spec: dict) -> str:
    return task_spec["goal"]["object"]


def trained_kinds(folder: Path) -> Counter:
    """Object kind -> how many training tasks had members conditioned on the advice (from the rollouts: a
    round handed off conditions none, so the rows say which rounds count)."""
    kinds = Counter()
    for rollouts in sorted(folder.glob("round_[0-9][0-9][0-9]/rollouts.parquet")):
        table = pq.read_table(rollouts, columns=["group_id", "task_json", "conditioned"]).to_pydict()
        scaffolded = {g: t for g, t, c in zip(table["group_id"], table["task_json"], table["conditioned"]) if c}
        kinds.update(object_kind(json.loads(t)["spec"]) for t in scaffolded.values())
    return kinds


def seed_buckets(kind_of_task: dict[str, str], trained: dict[str, int], plain: dict, grpo: dict, advised: dict) -> dict:
    """Per bucket of training exposure: the per-task differences plain - GRPO and advised - plain."""
    out = {b: {"gain": [], "advice": []} for b in BUCKETS}
    for task, kind in kind_of_task.items():
        b = out[bucket(trained.get(kind, 0))]
        b["gain"].append(int(plain[task]) - int(grpo[task]))
        b["advice"].append(int(advised[task]) - int(plain[task]))
    return out


def summarise(per_seed: dict[int, dict]) -> dict:
    """Pooled over seeds per bucket, and per seed the gain on trained kinds minus that on untrained ones."""
    pooled = {}
    for b in BUCKETS:
        gains = [x for s in per_seed.values() for x in s[b]["gain"]]
        advice = [x for s in per_seed.values() for x in s[b]["advice"]]
        pooled[b] = {"tasks": len(gains), "gain": fmean(gains) if gains else None,
                     "advice": fmean(advice) if advice else None}
    contrast, advice_contrast = {}, {}
    for seed, s in per_seed.items():
        trained = [x for b in BUCKETS[1:] for x in s[b]["gain"]]
        trained_advice = [x for b in BUCKETS[1:] for x in s[b]["advice"]]
        if trained and s["0"]["gain"]:
            contrast[seed] = fmean(trained) - fmean(s["0"]["gain"])
            advice_contrast[seed] = fmean(trained_advice) - fmean(s["0"]["advice"])

    def interval(values: dict) -> dict | None:
        return t_interval_mean(list(values.values())).to_dict() if values else None

    return {"buckets": pooled, "trained_minus_untrained": contrast,
            "trained_minus_untrained_interval": interval(contrast),
            "advice_trained_minus_untrained": advice_contrast,
            "advice_trained_minus_untrained_interval": interval(advice_contrast)}


def measure(config: str, seeds: list[int]) -> dict:
    ours, grpo = (sweep.runs_of(c, seeds, REFERENCE_RUNS) for c in (config, sweep.GRPO))
    per_seed = {}
    for seed in seeds:
        outcomes, grpo_plain = ours[seed]["final_tasks"][SPLIT], grpo[seed]["final_tasks"][SPLIT]["plain"]
        plain = outcomes["plain"]
        folder = Path(ours[seed]["folder"])
        params = json.loads((folder / "params.json").read_text())
        # The evaluation's tasks are the first ones of the split for the run's seed (``eval_tasks``).
        tasks = generate_tasks(params["train"]["env"], SPLIT, len(plain), params["seed"])
        if {t.task_id for t in tasks} != set(plain) or set(grpo_plain) != set(plain):
            raise ValueError(f"{folder}: its last evaluation and GRPO's are not of the split's first {len(plain)} "
                             "tasks of the seed")
        per_seed[seed] = seed_buckets({t.task_id: object_kind(t.spec) for t in tasks}, trained_kinds(folder),
                                      plain, grpo_plain, outcomes["with_bank"])
    return summarise(per_seed)


def _pts(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}"


def _interval(e: dict | None) -> str:
    return "–" if e is None else f"{100 * e['mean']:+.1f} [{100 * e['low']:+.1f}, {100 * e['high']:+.1f}]"


def report(results: dict, seeds: list[int], command: str) -> str:
    lines = ["# Is the advice's content kept? Gains by whether the scaffold trained on the task's object kind", "",
             __doc__.split("\n\n")[1].replace("\n", " "), "",
             f"Seeds {seeds}; household `{SPLIT}`, every evaluation task of each seed; {describe_machine()}; "
             f"command: `{command}`.", "",
             "| config | trained on the kind | tasks | plain − GRPO | with the advice − plain |",
             "| --- | --- | --- | --- | --- |"]
    for config, r in results.items():
        for b in BUCKETS:
            x = r["buckets"][b]
            lines.append(f"| {config} | {b} times | {x['tasks']} | {_pts(x['gain'])} | {_pts(x['advice'])} |")
    lines += ["", "Per seed, trained kinds (1 or more) minus untrained ones (0), in points; mean over seeds with "
              "its Student-t interval.", "",
              "| config | plain − GRPO: trained − untrained | per seed "
              "| with the advice − plain: trained − untrained |",
              "| --- | --- | --- | --- |"]
    for config, r in results.items():
        per = ", ".join(f"s{s} {100 * v:+.1f}" for s, v in r["trained_minus_untrained"].items())
        lines.append(f"| {config} | {_interval(r['trained_minus_untrained_interval'])} | {per} | "
                     f"{_interval(r['advice_trained_minus_untrained_interval'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", required=True, help="sweep rows with the oracle's advice")
    parser.add_argument("--seed", type=int, action="append", required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    results = {c: measure(c, args.seed) for c in args.config}
    command = "benchmarks/kind_coverage.py " + " ".join(
        [f"--config {c}" for c in args.config] + [f"--seed {s}" for s in args.seed])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kind_coverage.json").write_text(json.dumps({"seeds": args.seed, "results": results}, indent=2))
    (args.out / "kind_coverage.md").write_text(report(results, args.seed, command))
    print(report(results, args.seed, command))


if __name__ == "__main__":
    main()
