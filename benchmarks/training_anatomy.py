"""How the training episodes of the sweep's runs ended, round by round, plain members against the
members conditioned on the block, against GRPO's (issue 14: does the plain policy learn, during
training, the decisions the block spells out?).

Reads each run's own rollouts files (nothing is rolled out again: about a minute for three configurations
of five seeds): the sweep's configurations under benchmarks/sweep/internalization/<config>/, GRPO's in the
learning benchmark's runs. Only finished runs are read.

    .venv/bin/python benchmarks/training_anatomy.py --config o17 --config e18 --seed 0 ... --seed 4 [--late-from 4]

Writes benchmarks/results/training_anatomy.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's configurations and where their runs are
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.training_anatomy import markdown, run_counts, training_anatomy  # noqa: E402
from edge.runs import run_status  # noqa: E402


def main() -> None:
    def late_from(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--late-from", type=int, default=4,
                            help="the first round of the pooled late-training share")

    args, seeds = sweep.parse_evaluation_args(__doc__.split("\n\n")[0], extra=late_from)
    seeds = sorted(set(seeds))
    runs: dict[str, dict[int, list]] = {}
    for config in [sweep.GRPO, *args.config]:
        runs[config] = {}
        for seed in seeds:
            folder = sweep.run_folder(config, seed, args.reference_runs)
            status = run_status(folder)
            if status.state != "finished":
                sys.exit(f"{folder}: the run is {status.state}, not finished; finish it (the sweep resumes it) first")
            runs[config][seed] = run_counts(folder, status.rounds_planned)
            print(f"{config} seed {seed}: {status.rounds_planned} rounds read", flush=True)
    report = training_anatomy(runs, reference=f"{sweep.GRPO} plain", late_from=args.late_from)
    command = ("benchmarks/training_anatomy.py " + " ".join(f"--config {c}" for c in args.config) + " "
               + " ".join(f"--seed {s}" for s in seeds) + f" --late-from {args.late_from}"
               + ("" if args.reference_runs == Path("benchmarks/runs") else f" --reference-runs {args.reference_runs}"))
    report |= {"seeds": seeds, "machine": describe_machine(), "command": command}
    sweep.OUT.mkdir(parents=True, exist_ok=True)
    (sweep.OUT / "training_anatomy.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    note = (f"The training rollouts of the sweep's runs (configurations in internalization.md) and of GRPO's, "
            f"household, seeds {', '.join(map(str, seeds))}: 16 tasks a round of 8 members, all plain for GRPO; for "
            f"EDGE 4 conditioned on the block where the task retrieved one (every task with the oracle's advice), "
            f"the others plain. Read on {report['machine']}; which machine made each configuration's "
            f"runs, internalization.md says. Command: `.venv/bin/python {command}`.")
    title = "How the training episodes ended, round by round"
    (sweep.OUT / "training_anatomy.md").write_text(markdown(report, title, note))
    print((sweep.OUT / "training_anatomy.md").read_text())


if __name__ == "__main__":
    main()
