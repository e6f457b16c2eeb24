"""Where the sweep's final policies lose, by task type and failure pattern, against GRPO's (issue 14:
which limit stops the plain policy keeping what the scaffold teaches).

Each configuration's runs, and the learning benchmark's GRPO runs, are evaluated once more after
training, exactly as their last evaluation (``edge.benchmarking.split_eval``: the run's own bank
settings and final bank, the first ``--episodes`` tasks of the split, the same streams for every run of a
seed), now recording how each lost episode failed (``EvalResult.failures_by_type``). Rows: GRPO plain, and
for each configuration plain and with its bank (the oracle's advice for o…).

    .venv/bin/python benchmarks/failure_anatomy.py --config o17 --seed 0 ... --seed 4 [--episodes 200] [--name N]

Evaluations are kept in benchmarks/sweep/internalization/anatomy-evals/, so a rerun only evaluates what is
new. Writes benchmarks/results/failure_anatomy_<split>[_<name>].{json,md}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's configurations and where their runs are
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.failure_anatomy import anatomy, markdown  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.split_eval import final_evaluation  # noqa: E402

CACHE = sweep.ROOT / "anatomy-evals"
"""Not split_table's cache: evaluations kept there before they recorded failures lack them."""


def main() -> None:
    args, seeds = sweep.parse_evaluation_args(
        __doc__.split("\n\n")[0], "test_seen", 200,
        extra=lambda p: p.add_argument("--name", default="", help="suffix of the output files (keeps other tables)"))
    torch.set_num_threads(1)  # as every benchmark run evaluates: a run's own split reproduces its eval.json
    rows: dict[str, dict[int, dict]] = {}
    for config in [sweep.GRPO, *args.config]:
        for seed in seeds:
            started = time.perf_counter()
            result = final_evaluation(sweep.run_folder(config, seed, args.reference_runs), args.split,
                                      args.episodes, cache_dir=CACHE)
            for condition in ("plain", "with_bank"):
                if condition in result:
                    rows.setdefault(f"{config} {condition.replace('_', ' ')}", {})[seed] = result[condition]
            print(f"{config} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    report = anatomy(rows, reference=f"{sweep.GRPO} plain")
    command = ("benchmarks/failure_anatomy.py " + " ".join(f"--config {c}" for c in args.config) + " "
               + " ".join(f"--seed {s}" for s in seeds) + f" --split {args.split} --episodes {args.episodes}"
               + (f" --name {args.name}" if args.name else ""))
    report |= {"seeds": seeds, "split": args.split, "episodes": args.episodes, "machine": describe_machine(),
               "command": command}
    name = f"failure_anatomy_{args.split}{'_' + args.name if args.name else ''}"
    sweep.OUT.mkdir(parents=True, exist_ok=True)
    (sweep.OUT / f"{name}.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    note = (f"The final policies of the sweep's runs (configurations in internalization.md) and of GRPO's, "
            f"household {args.split}, the first {args.episodes} tasks, seeds {', '.join(map(str, seeds))}; "
            f"machine: {report['machine']}. Command: `.venv/bin/python {command}`.")
    (sweep.OUT / f"{name}.md").write_text(markdown(report, f"Where the final policies lose ({args.split})", note))
    print((sweep.OUT / f"{name}.md").read_text())


if __name__ == "__main__":
    main()
