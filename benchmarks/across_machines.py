"""The sweep's configurations made on more than one machine, pooled (issues 14 and 16: more seeds).

Float kernels differ between CPUs and behaviour cloning amplifies the difference, so a configuration made
again on another machine (the sweep's and split_table's `--tag`: rows NAME and NAME@TAG) is an independent
replicate of every seed: its own warm starts, its own GRPO runs. Each replicate stays paired inside its
machine (the configuration's run against the GRPO run of the same machine and seed); this pools those
paired differences over machines, (machine, seed) being the unit, into one Student-t interval and a paired
permutation p-value. The machine's own effect is part of the spread the interval sees, not removed.

    .venv/bin/python benchmarks/across_machines.py

Reads benchmarks/results/internalization.json (test_seen) and split_test_unseen.json; writes
benchmarks/results/across_machines.{json,md} and one figure per split, across_machines_<split>.png (each
replicate's plain − GRPO, coloured by machine, under the pooled interval). Reads results only; runs nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's results folder and number format
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.learning import paired_difference  # noqa: E402
from edge.plots import replicates_plot  # noqa: E402

TABLES = {"test_seen": "internalization.json", "test_unseen": "split_test_unseen.json"}


def machine_label(machine: str) -> str:
    """A row's machine as tables and figures name it: 'x86_64 AMD EPYC, 2 cores, ...' -> 'AMD EPYC'."""
    return machine.split(",")[0].removeprefix("x86_64 ")


def replicates(row: dict, split: str) -> list[tuple[str, float, float, float | None]]:
    """(seed, plain, GRPO's plain, with the bank or advice) of one row, per seed it ran."""
    with_bank = row.get("with_advice" if split == "test_seen" else "with_bank") or {}
    out = []
    for seed, diff in row["minus_grpo"]["per_seed"].items():
        plain = row["plain"][seed]
        grpo = row["grpo"][seed] if "grpo" in row else plain - diff  # split rows keep only the difference
        out.append((seed, plain, grpo, with_bank.get(seed)))
    return out


def pooled(rows: dict, split: str) -> dict:
    """Per configuration made on two machines or more: each machine's rows and the pool of them."""
    by_config: dict[str, list[str]] = {}
    for name in rows:
        if "-x" not in name:  # the longer view has no GRPO of its own machine to pair with here
            by_config.setdefault(name.split("@")[0], []).append(name)
    out = {}
    for config, names in by_config.items():
        if len({rows[n].get("machine") for n in names}) < 2:
            continue
        by_row = {n: replicates(rows[n], split) for n in names}
        units = [(f"{name}:s{seed}", plain, grpo, with_bank) for name, found in by_row.items()
                 for seed, plain, grpo, with_bank in found]
        labels, plain, grpo, with_bank = (list(x) for x in zip(*units))
        entry = {"rows": {n: {"machine": rows[n].get("machine"), "seeds": len(by_row[n]),
                              "minus_grpo": {k: rows[n]["minus_grpo"][k] for k in ("mean", "low", "high")}}
                          for n in names},
                 "replicates": len(units), "plain": fmean(plain), "grpo": fmean(grpo),
                 "minus_grpo": paired_difference(plain, grpo, labels)}
        if all(w is not None for w in with_bank):
            entry["with_bank"] = fmean(with_bank)
            entry["retention"] = fmean(p / w for p, w in zip(plain, with_bank) if w)
            entry["with_bank_minus_grpo"] = paired_difference(with_bank, grpo, labels)
        out[config] = entry
    return out


def markdown(report: dict) -> str:
    lines = ["# Configurations made on more than one machine, pooled", "",
             "Each (machine, seed) is one replicate, paired inside its machine with GRPO's run of the same seed; "
             "the pool is a Student-t interval (95%) over all replicates and a paired permutation p-value. "
             "Machines differ in float kernels, so their warm starts and runs differ: the machine's own effect is "
             "part of the spread. Command: `.venv/bin/python benchmarks/across_machines.py`. What each configuration "
             "is: [internalization.md](internalization.md).", ""]
    for split, configs in report.items():
        lines += [f"## {split}", "",
                  "| config | rows (machine: plain − GRPO) | replicates | plain | GRPO | plain − GRPO (pooled) | p | "
                  "with bank / advice | retention | with − GRPO's plain |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for config, e in configs.items():
            rows = "; ".join(f"{n} ({machine_label(r['machine'])}, {r['seeds']} seeds): "
                             f"{sweep.signed_points(r['minus_grpo'])}" for n, r in e["rows"].items())
            scaffold = "– | – | –"
            if "with_bank" in e:
                lift = sweep.signed_points(e["with_bank_minus_grpo"])
                scaffold = f"{e['with_bank']:.1%} | {e['retention']:.1%} | {lift}"
            lines.append(f"| {config} | {rows} | {e['replicates']} | {e['plain']:.1%} | {e['grpo']:.1%} | "
                         f"{sweep.signed_points(e['minus_grpo'])} | {e['minus_grpo']['p_value']:.3f} | {scaffold} |")
        lines.append("")
    return "\n".join(lines)


def figure(configs: dict, split: str, path: Path) -> Path:
    """Each replicate's plain − GRPO in points, by configuration and machine, under the pooled interval."""
    rows: dict[str, dict[str, list[float]]] = {}
    for config, e in configs.items():
        for label, diff in e["minus_grpo"]["per_seed"].items():
            machine = machine_label(e["rows"][label.split(":")[0]]["machine"])
            rows.setdefault(config, {}).setdefault(machine, []).append(100 * diff)
    pooled_points = {c: tuple(100 * e["minus_grpo"][k] for k in ("mean", "low", "high")) for c, e in configs.items()}
    return replicates_plot(rows, pooled_points, path, f"{split}: plain − GRPO per (machine, seed), pooled 95% interval")


def main() -> None:
    report = {}
    for split, file in TABLES.items():
        path = sweep.OUT / file
        if path.exists():
            report[split] = pooled(json.loads(path.read_text()), split)
            if report[split]:
                figure(report[split], split, sweep.OUT / f"across_machines_{split}.png")
    (sweep.OUT / "across_machines.json").write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    (sweep.OUT / "across_machines.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
