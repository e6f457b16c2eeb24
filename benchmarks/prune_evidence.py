"""On how much evidence the bank's pruning acted: for a sweep configuration's final banks, the entries each
rule pruned, how many groups had used them, and the gap between the conditioned and the plain members of
those groups over the rounds that credited them (positive: the entry was helping, on average).

    .venv/bin/python benchmarks/prune_evidence.py --config e18 --seed 0 ... --seed 4

Reads only the runs' last bank snapshots (round_<k>/bank.parquet). Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import fmean, median

sys.path.insert(0, str(Path(__file__).resolve().parent))  # where the sweep's runs are
import internalization_sweep as sweep  # noqa: E402

from edge.bank.store import read_snapshot  # noqa: E402
from edge.envs.base import EVERY_SUBJECT  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="a sweep configuration that keeps a bank (e18, e19 ...)")
    parser.add_argument("--seed", type=int, action="append", help="seeds (default 0 and 1)")
    parser.add_argument("--reference-runs", type=Path, default=Path("benchmarks/runs"))
    args = parser.parse_args()
    entries = []
    for seed in args.seed or [0, 1]:
        folder = sweep.run_folder(args.config, seed, args.reference_runs)
        last = sorted(folder.glob("round_[0-9][0-9][0-9]"))[-1]
        entries += read_snapshot(last / "bank.parquet")
    print(f"{args.config}: {len(entries)} entries in the final banks\n")
    print("| pruned as | about | entries | median uses | mean conditioned − plain | share helping on average |")
    print("| --- | --- | --- | --- | --- | --- |")
    for reason in ("internalized", "not_helping", "stale", "size_cap"):
        for about, is_type in (("a task type", True), ("a subject", False)):
            pruned = [e for e in entries if e.prune_reason == reason and (e.key == EVERY_SUBJECT) == is_type]
            if not pruned:
                continue
            gaps = [fmean(c - p for c, p in zip(e.history_success_conditioned, e.history_success_plain))
                    for e in pruned if e.history_rounds]
            gap = f"{100 * fmean(gaps):+.1f} points" if gaps else "– (never used)"
            share = f"{sum(g > 0 for g in gaps) / len(gaps):.0%}" if gaps else "–"
            print(f"| {reason} | {about} | {len(pruned)} | {median(e.uses for e in pruned):g} | {gap} | {share} |")


if __name__ == "__main__":
    main()
