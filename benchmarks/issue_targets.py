"""Issues 14 and 16's targets, read off the measured tables rather than worked out by hand.

For one EDGE row (its own bank) and one oracle-control row of the sweep, on every split measured for both
(test_seen: benchmarks/results/internalization.json; any other split: split_<split>.json, written by
benchmarks/split_table.py), over the seeds both rows have:

- issue 16: EDGE's plain − GRPO ≥ +8 points with the paired 95% interval above zero; EDGE's gain over GRPO at
  least 70% of the oracle control's on the same seeds; retention ≥ 96% with the success with its bank above
  GRPO's plain success;
- issue 14: the oracle control's plain − GRPO ≥ +10 with the interval above zero; retention ≥ 90% with the
  success with the advice at least the 52.0% of the issue's best seed when it was filed (test_seen only).

    .venv/bin/python benchmarks/issue_targets.py --edge e49 --oracle o45@xeon

Writes benchmarks/results/issue_targets_<edge>.{md,json}. Each figure says what was measured and whether it
meets its target; nothing here runs a policy.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's results folder and its split
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.learning import paired_difference  # noqa: E402

RESULTS = sweep.OUT
EDGE_GAIN, EDGE_SHARE, EDGE_RETENTION = 0.08, 0.70, 0.96
"""Issue 16: plain − GRPO, the share of the oracle control's gain, retention."""
ORACLE_GAIN, ORACLE_RETENTION, ORACLE_WITH_ADVICE = 0.10, 0.90, 0.52
"""Issue 14: plain − GRPO, retention, the success with the advice (test_seen, the issue's best seed when filed)."""


def per_seed(table: dict, name: str, path: Path) -> dict[int, dict[str, float]]:
    """Seed -> plain, with (its bank or the advice), retention and GRPO's plain success for row ``name`` of a
    sweep table (internalization.json) or a split table (split_<split>.json)."""
    if name not in table:
        raise SystemExit(f"{path}: no row {name!r}; rows: {', '.join(table)}")
    row = table[name]
    with_key = "with_advice" if "with_advice" in row else "with_bank"
    if with_key not in row:
        raise SystemExit(f"{path}: row {name!r} has no success with its bank or advice (GRPO's own row?)")
    out = {}
    for seed in row["seeds"]:
        s = str(seed)
        # A split table keeps GRPO's success as the paired difference; the sweep's table keeps it as is.
        grpo = row["grpo"][s] if "grpo" in row else row["plain"][s] - row["minus_grpo"]["per_seed"][s]
        out[int(seed)] = {"plain": row["plain"][s], "with": row[with_key][s], "retention": row["retention"][s],
                          "grpo": grpo}
    return out


def split_targets(edge: dict[int, dict], oracle: dict[int, dict], split: str) -> dict:
    """Both issues' figures on the seeds the two rows share, each with its target and whether it is met."""
    seeds = sorted(set(edge) & set(oracle))
    if not seeds:
        raise SystemExit(f"{split}: the two rows share no seed (EDGE {sorted(edge)}, oracle {sorted(oracle)})")
    grpo_edge = [edge[s]["grpo"] for s in seeds]
    if any(abs(edge[s]["grpo"] - oracle[s]["grpo"]) > 1e-9 for s in seeds):
        theirs = [oracle[s]["grpo"] for s in seeds]
        raise SystemExit(f"{split}: the rows were compared with different GRPO runs (per seed EDGE's {grpo_edge}, "
                         f"the oracle's {theirs}); compare rows of one machine")

    def gain(rows):
        return paired_difference([rows[s]["plain"] for s in seeds], grpo_edge, seeds)

    edge_gain, oracle_gain = gain(edge), gain(oracle)
    share = edge_gain["mean"] / oracle_gain["mean"] if oracle_gain["mean"] > 0 else None
    edge_retention = fmean(edge[s]["retention"] for s in seeds)
    oracle_retention = fmean(oracle[s]["retention"] for s in seeds)
    edge_with, oracle_with = fmean(edge[s]["with"] for s in seeds), fmean(oracle[s]["with"] for s in seeds)
    grpo_mean = fmean(grpo_edge)
    out = {
        "seeds": seeds, "grpo_plain": grpo_mean,
        "edge": {"plain": fmean(edge[s]["plain"] for s in seeds), "with_bank": edge_with,
                 "minus_grpo": edge_gain, "share_of_oracle_gain": share, "retention": edge_retention},
        "oracle": {"plain": fmean(oracle[s]["plain"] for s in seeds), "with_advice": oracle_with,
                   "minus_grpo": oracle_gain, "retention": oracle_retention},
        "met": {target: bool(met) for target, met in {
            "issue 16: EDGE − GRPO ≥ +8, interval above 0": edge_gain["mean"] >= EDGE_GAIN and edge_gain["low"] > 0,
            "issue 16: ≥ 70% of the oracle control's gain": share is not None and share >= EDGE_SHARE,
            "issue 16: retention ≥ 96%": edge_retention >= EDGE_RETENTION,
            "issue 16: with its bank above GRPO's plain": edge_with > grpo_mean,
            "issue 14: oracle − GRPO ≥ +10, interval above 0": (oracle_gain["mean"] >= ORACLE_GAIN
                                                                 and oracle_gain["low"] > 0),
            "issue 14: retention ≥ 90%": oracle_retention >= ORACLE_RETENTION,
        }.items()},
    }
    if split == sweep.SPLIT:
        out["met"]["issue 14: with the advice ≥ 52.0%"] = bool(oracle_with >= ORACLE_WITH_ADVICE)
    if len(oracle) > len(seeds):  # the oracle row's own, longer read beside the shared seeds' (issue 14 asks five)
        own = sorted(oracle)
        out["oracle_all_seeds"] = {
            "seeds": own, "retention": fmean(oracle[s]["retention"] for s in own),
            "minus_grpo": paired_difference([oracle[s]["plain"] for s in own], [oracle[s]["grpo"] for s in own], own)}
    return out


def tables(edge: str, oracle: str, splits: list[str]) -> dict[str, tuple[dict, dict]]:
    """Split -> (EDGE's rows by seed, the oracle's) from each split's table: the sweep's own for its split, the
    split table otherwise; a missing table or row stops with its path named."""
    out = {}
    for split in splits:
        path = RESULTS / ("internalization.json" if split == sweep.SPLIT else f"split_{split}.json")
        if not path.exists():
            raise SystemExit(f"{path}: not found (benchmarks/split_table.py --split {split} writes it)")
        table = json.loads(path.read_text())
        out[split] = (per_seed(table, edge, path), per_seed(table, oracle, path))
    return out


def _points(d: dict) -> str:
    return f"{100 * d['mean']:+.2f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"


def markdown(edge: str, oracle: str, result: dict) -> str:
    lines = [f"# Issues 14 and 16's targets: EDGE row {edge}, oracle-control row {oracle}", "",
             "Read off the sweep's tables (`benchmarks/issue_targets.py`): each split's figures over the seeds "
             "both rows have, paired by seed against the same GRPO runs, with the 95% Student-t interval over "
             "seeds; retention is the mean of the seeds' ratios; the share of the oracle's gain is the ratio of the "
             "mean gains.", "",
             "| split | seeds | GRPO | EDGE plain / with its bank | retention | EDGE − GRPO | share of the oracle's "
             "gain | oracle plain / with the advice | retention | oracle − GRPO |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for split, r in result.items():
        e, o = r["edge"], r["oracle"]
        share = "–" if e["share_of_oracle_gain"] is None else f"{e['share_of_oracle_gain']:.0%}"
        lines.append(f"| {split} | {len(r['seeds'])} | {100 * r['grpo_plain']:.2f}% | {100 * e['plain']:.2f}% / "
                     f"{100 * e['with_bank']:.2f}% | {100 * e['retention']:.1f}% | {_points(e['minus_grpo'])} "
                     f"| {share} "
                     f"| {100 * o['plain']:.2f}% / {100 * o['with_advice']:.2f}% | {100 * o['retention']:.1f}% "
                     f"| {_points(o['minus_grpo'])} |")
    for split, r in result.items():
        if "oracle_all_seeds" in r:
            a = r["oracle_all_seeds"]
            lines.append(f"\n{split}: the oracle row over all its {len(a['seeds'])} seeds: − GRPO "
                         f"{_points(a['minus_grpo'])}, retention {100 * a['retention']:.1f}%.")
    lines += ["", "| split | target | met (on the shared seeds) |", "|---|---|---|"]
    for split, r in result.items():
        lines += [f"| {split} | {target} | {'yes' if met else 'no'} |" for target, met in r["met"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edge", required=True, help="an EDGE row of the sweep (e49)")
    parser.add_argument("--oracle", required=True, help="an oracle-control row measured beside it (o45@xeon)")
    parser.add_argument("--split", action="append", help="splits (default test_seen and test_unseen)")
    args = parser.parse_args()
    splits = args.split or [sweep.SPLIT, "test_unseen"]
    result = {split: split_targets(e, o, split) for split, (e, o) in tables(args.edge, args.oracle, splits).items()}
    stem = RESULTS / f"issue_targets_{args.edge.replace('@', '_')}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(args.edge, args.oracle, result))
    print(stem.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
