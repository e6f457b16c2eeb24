"""The sweep's configurations on a split their runs did not evaluate during training (issue 16: the same
table for test_unseen).

The sweep's runs (benchmarks/internalization_sweep.py) evaluate test_seen only. This evaluates the final
policy of each configuration's runs, and of the learning benchmark's GRPO runs, on the first
`--episodes` tasks of `--split`, exactly as each run's last evaluation would have with that split
(`edge.benchmarking.split_eval`: the run's own bank settings and final bank, the same tasks and
streams for every run of a seed). So each configuration is compared with GRPO seed by seed and task by
task, as in internalization.md.

    .venv/bin/python benchmarks/split_table.py --config e19 --config e18 --seed 0 ... --seed 4 [--split test_unseen]

Each evaluation is kept (benchmarks/sweep/internalization/split-evals/), so a rerun only evaluates what
is new. Writes benchmarks/results/split_<split>.{json,md}, one row per configuration (rows of other
configurations already there are kept).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from statistics import fmean

import torch
from filelock import FileLock

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's configurations and where their runs are
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.learning import paired_difference  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.split_eval import final_evaluation  # noqa: E402

CACHE = sweep.ROOT / "split-evals"


def evaluations(config: str, seeds: list[int], split: str, episodes: int, reference_runs: Path) -> dict[int, dict]:
    """Seed -> the final evaluation of configuration ``config``'s run of that seed on ``split``."""
    out = {}
    for seed in seeds:
        folder = sweep.run_folder(config, seed, reference_runs)
        started = time.perf_counter()
        out[seed] = final_evaluation(folder, split, episodes, cache_dir=CACHE)
        print(f"{config} seed {seed}: plain {out[seed]['plain']['success']:.1%}"
              + (f", with its bank {out[seed]['with_bank']['success']:.1%}" if "with_bank" in out[seed] else "")
              + f" ({time.perf_counter() - started:.0f} s)", flush=True)
    return out


def row(config: str, ours: dict[int, dict], grpo: dict[int, dict]) -> dict:
    """Final plain success, with the run's own bank (or advice), retention, − GRPO and with − plain."""
    seeds = sorted(ours)

    def success(runs: dict, s: int, condition: str) -> float:
        return runs[s][condition]["success"]

    def won(runs: dict, s: int, condition: str) -> dict:
        return runs[s][condition]["won_by_task"]

    out = {"asks": sweep.CONFIGS[config][0] if config in sweep.CONFIGS else "GRPO", "seeds": seeds,
           "plain": {s: success(ours, s, "plain") for s in seeds},
           "minus_grpo": paired_difference([success(ours, s, "plain") for s in seeds],
                                           [success(grpo, s, "plain") for s in seeds], seeds,
                                           [(won(ours, s, "plain"), won(grpo, s, "plain")) for s in seeds])}
    if all("with_bank" in ours[s] for s in seeds):
        out |= {"with_bank": {s: success(ours, s, "with_bank") for s in seeds},
                "retention": {s: ours[s]["retention"] for s in seeds},
                "retrieved_share": {s: ours[s]["retrieved_share"] for s in seeds},
                "with_bank_minus_plain": paired_difference(
                    [success(ours, s, "with_bank") for s in seeds], [success(ours, s, "plain") for s in seeds],
                    seeds, [(won(ours, s, "with_bank"), won(ours, s, "plain")) for s in seeds])}
    return out


def interval(d: dict | None) -> str:
    """A paired difference as the sweep's table writes it (``_points``), or – where there is none."""
    return sweep._points(d) if d else "–"


def mean_of(values: dict | None) -> str:
    if not values or None in values.values():
        return "–"
    return f"{fmean(values.values()):.1%}"


def markdown(rows: dict, split: str, episodes: int) -> str:
    lines = [f"# The sweep's configurations on household {split} ({episodes} tasks)", "",
             "Each run's final policy evaluated after training on a split it did not evaluate "
             "(`benchmarks/split_table.py`, `edge.benchmarking.split_eval`): its own bank settings and final bank, "
             "the same tasks and streams for every run of a seed, paired with GRPO's run of the seed task by task. "
             "Intervals: Student-t over seeds (95%).", "",
             "| config | seeds | plain | with its bank / advice | retention | tasks retrieving | − GRPO (plain) "
             "| per seed | with − plain | machine |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in rows.items():
        per_seed = ", ".join(f"s{s} {100 * v:+.1f}" for s, v in r["minus_grpo"]["per_seed"].items())
        lines.append(f"| {name} | {len(r['seeds'])} | {mean_of(r['plain'])} | {mean_of(r.get('with_bank'))} "
                     f"| {mean_of(r.get('retention'))} | {mean_of(r.get('retrieved_share'))} "
                     f"| {interval(r['minus_grpo'])} | {per_seed} | {interval(r.get('with_bank_minus_plain'))} "
                     f"| {r['machine']} |")
    lines += ["", "What each configuration is: benchmarks/results/internalization.md (same names)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    def tag_option(parser):
        parser.add_argument("--tag", help="write the rows as NAME@TAG (configurations made again on another machine)")

    args, seeds = sweep.parse_evaluation_args(__doc__.split("\n\n")[0], "test_unseen", 400, extra=tag_option)
    machine = describe_machine()
    out = sweep.OUT / f"split_{args.split}.json"
    names = {c: sweep.key(c, 1, args.tag) for c in args.config}
    if out.exists():  # before an hour of evaluations, not after
        sweep.refuse_other_machine(json.loads(out.read_text()), list(names.values()), machine, out)
    # One torch thread, as every benchmark run evaluates (RUN_ENVIRONMENT): float sums then add up in the
    # same order, so a run's own split gives exactly its eval.json.
    torch.set_num_threads(1)
    grpo = evaluations(sweep.GRPO, seeds, args.split, args.episodes, args.reference_runs)
    new = {c: row(c, evaluations(c, seeds, args.split, args.episodes, args.reference_runs), grpo) for c in args.config}
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):  # two tables made side by side keep each other's rows
        rows = json.loads(out.read_text()) if out.exists() else {}
        sweep.refuse_other_machine(rows, list(names.values()), machine, out)
        for config, r in new.items():
            rows[names[config]] = r | {"episodes": args.episodes, "machine": machine,
                                       "command": f"benchmarks/split_table.py --config {config} "
                                                  + " ".join(f"--seed {s}" for s in seeds) + f" --split {args.split}"
                                                  + (f" --tag {args.tag}" if args.tag else "")}
        out.write_text(json.dumps(rows, indent=1, sort_keys=True))
        (sweep.OUT / f"split_{args.split}.md").write_text(markdown(rows, args.split, args.episodes))
    print((sweep.OUT / f"split_{args.split}.md").read_text())


if __name__ == "__main__":
    main()
