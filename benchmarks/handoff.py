"""The scaffold handed off: is it worth keeping once it has done its early work?

The methods with experience lead GRPO after a few rounds (the oracle control: +6.3 points after round 3 on the
usual household from N = 150 warm starts, ten seeds; +4.5 on the moved household from warm starts that read the
advice), and in some settings GRPO closes most of that by the last round. Either the scaffold's own update slows
learning in the later rounds, or GRPO's later rounds catch up whatever the other method does then.
``bank.rho_schedule: handoff`` tells them apart: from round ``handoff_round`` (4) on, nothing is retrieved or
distilled and every round takes GRPO's update, with the same episodes and optimizer steps, on the policy the
scaffold trained. The rounds before are the scaffolded run's, byte for byte (checked for o26 against o23: every
round's rollouts and the round-3 weights hash the same).

Each world compares, per seed from the same warm starts: GRPO, the scaffolded method, and the same method handed
off. Its runs are made elsewhere: on the usual household by the internalization sweep (rows o23, o26-o29, e22,
e24; N = 30 warm starts), on the moved one by ``shared_settings.py`` (``moved_reading150`` and
``moved_reading150_handoff``). This script only reads them:

    .venv/bin/python benchmarks/handoff.py --seed 0 ... [--seed 4]

Writes benchmarks/results/handoff.{md,json} and one figure per world, handoff_<world>.png: the plain members'
training success round by round (mean over seeds), and the conditioned members' while the scaffold is on.
Seconds a round are the collection and the update (evaluations not), mean over seeds and rounds, in the rounds
with conditioned members and in those without. Compare them within a series only: the same computation (o23's
and o26's rounds 0-3) took 1.5 to 3 times as long in o23's runs, made in other sessions beside other jobs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's and the shared settings' runs
import shared_settings as shared  # noqa: E402
import torch  # noqa: E402

from edge.benchmarking.learning import read_run  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.split_eval import final_evaluation  # noqa: E402
from edge.benchmarking.stats import t_interval_mean  # noqa: E402
from edge.plots import curves_plot  # noqa: E402

sweep = shared.sweep
REFERENCE_RUNS = Path("benchmarks/runs")
EVALS = shared.ROOT / "handoff-evals"
"""Evaluations of policies after the round before a hand-off (``final_evaluation``'s cache)."""
EPISODES = 400
HANDOFF_ROUND = 4
"""Where rows o26 and e24 and the setting moved_reading150_handoff hand off (bank.handoff_round)."""


def household(config: str):
    return lambda seed: sweep.run_folder(config, seed, REFERENCE_RUNS)


def moved(setting: str, method: str):
    return lambda seed: shared.run_folder(setting, method, seed)


WORLDS = {
    "household": {
        "GRPO": (household(sweep.GRPO), None),
        "oracle control (o23)": (household("o23"), None),
        "o23 handed off after round 3 (o26)": (household("o26"), "oracle control (o23)"),
        "o23 handed off after round 1 (o27)": (household("o27"), "oracle control (o23)"),
        "o26, six of eight members conditioned (o28)": (household("o28"), None),
        "o26, every member conditioned (o29)": (household("o29"), None),
        "o26, the teacher amplified twice (o30)": (household("o30"), None),
        "EDGE (e22)": (household("e22"), None),
        "e22 handed off after round 3 (e24)": (household("e24"), "EDGE (e22)"),
    },
    "household_moved": {
        "GRPO": (moved("moved_reading150", sweep.GRPO), None),
        "oracle control (o23)": (moved("moved_reading150", sweep.ORACLE), None),
        "o23 handed off after round 3": (moved("moved_reading150_handoff", sweep.ORACLE), "oracle control (o23)"),
        "EDGE (e22)": (moved("moved_reading150", "edge"), None),
        "e22 handed off after round 3": (moved("moved_reading150_handoff", "edge"), "EDGE (e22)"),
    },
}
"""Per world, each series: where its run of a seed is, and the scaffolded series it hands off, to be paired with
(None for the rest). The first series is the baseline."""
FIGURE_SERIES = {
    "household": ["GRPO", "oracle control (o23)", "o23 handed off after round 3 (o26)", "EDGE (e22)",
                  "e22 handed off after round 3 (e24)"],
    "household_moved": ["GRPO", "oracle control (o23)", "o23 handed off after round 3", "EDGE (e22)",
                        "e22 handed off after round 3"],
}
"""The series drawn: each method kept and handed off after round 3, beside GRPO (the tables have them all)."""
WARM_STARTS = {"household": "the benchmark's (N = 30)", "household_moved": "reading150's (N = 150, advice read)"}


def round_metrics(folder: Path) -> list[dict]:
    """The training episodes' success per round (plain members, and conditioned ones where there were any)."""
    out = []
    for metrics in sorted(folder.glob("round_[0-9][0-9][0-9]/train_metrics.json")):
        m = json.loads(metrics.read_text())
        # A round with every member conditioned (bank.rho = 1) has no plain member: train.py records None there
        # now; runs written before it did record 0, which is no success rate either.
        out.append({"round": m["round"], "plain": None if m.get("rho") == 1.0 else m["train_success_plain"],
                    "conditioned": m["train_success_conditioned"],
                    "seconds": m["collect_seconds"] + m["update_seconds"]})
    return out


def handoff_round(params: dict) -> int | None:
    """The first round a run (its recorded ``params.json``) trained without its scaffold (``bank.handoff_round``),
    None if it never did."""
    bank = params.get("bank", {})
    return bank.get("handoff_round") if bank.get("rho_schedule") == "handoff" else None


def after_round(folder: Path, k: int) -> dict:
    """The run's policy after round ``k`` on the first ``EPISODES`` tasks of the split, with that round's
    evaluation stream (the same for every run of a seed: paired), shaped as ``read_run``'s final evaluation."""
    ev = final_evaluation(folder, shared.SPLIT, EPISODES, cache_dir=EVALS, after_round=k)
    print(f"{folder} after round {k}: plain {ev['plain']['success']:.1%}", flush=True)
    return shared.as_final(ev, shared.SPLIT)


def at_handoff(folders: dict[int, Path], grpo: dict[int, Path]) -> dict | None:
    """Where a handed-off series stood against GRPO when its scaffold stopped: both policies after the round
    before the hand-off. None for a series that keeps a bank of its own (the bank as that round left it is
    not kept live) or was never handed off."""
    recorded = [json.loads((f / "params.json").read_text()) for f in folders.values()]
    rounds = {handoff_round(p) for p in recorded}
    if len(rounds) != 1 or None in rounds or recorded[0]["train"]["method"] != sweep.ORACLE:
        return None
    k = rounds.pop() - 1
    ours = {s: after_round(f, k) for s, f in folders.items()}
    theirs = {s: after_round(f, k) for s, f in grpo.items()}
    return {"after_round": k,
            "plain": t_interval_mean([shared.final(r, "plain") for r in ours.values()]).to_dict(),
            "with_bank": t_interval_mean([shared.final(r, "with_bank") for r in ours.values()]).to_dict(),
            "grpo": t_interval_mean([shared.final(r, "plain") for r in theirs.values()]).to_dict(),
            "minus_grpo": shared.compare(ours, theirs)}


def series_report(folders: dict[int, Path], runs: dict[int, dict], grpo: dict[int, dict]) -> dict:
    rounds = {s: round_metrics(f) for s, f in folders.items()}
    n_rounds = min(len(r) for r in rounds.values())
    per_round = []
    for k in range(n_rounds):
        conditioned = [r[k]["conditioned"] for r in rounds.values() if r[k]["conditioned"] is not None]
        plain = [r[k]["plain"] for r in rounds.values() if r[k]["plain"] is not None]
        per_round.append({"round": k, "plain": fmean(plain) if len(plain) == len(rounds) else None,
                          "conditioned": fmean(conditioned) if len(conditioned) == len(rounds) else None})
    out = {"rounds": per_round,
           # The scaffold's cost in time: a round's collection (retrieval included) and update, evaluations not, in
           # the rounds with conditioned members and in those without; compared within a series (same conditions).
           "seconds_a_round": {key: fmean(seconds) if (seconds := [r["seconds"] for x in rounds.values() for r in x
                                                                  if (r["conditioned"] is not None) == scaffolded])
                               else None for key, scaffolded in (("scaffolded", True), ("plain", False))},
           "plain": t_interval_mean([shared.final(r, "plain") for r in runs.values()]).to_dict()}
    if all(shared.final(r, "with_bank") is not None for r in runs.values()):
        out["with_bank"] = t_interval_mean([shared.final(r, "with_bank") for r in runs.values()]).to_dict()
    if runs is not grpo:
        out["minus_grpo"] = shared.compare(runs, grpo)
    return out


def report(seeds: list[int]) -> dict:
    result = {}
    for world, series in WORLDS.items():
        folders = {name: {s: where(s) for s in seeds} for name, (where, _) in series.items()}
        done = {name: f for name, f in folders.items() if all(shared.finished(x) for x in f.values())}
        runs = {name: {s: read_run(x, [shared.SPLIT]) for s, x in f.items()} for name, f in done.items()}
        baseline = next(iter(series))
        if baseline not in runs:
            continue
        rows = {name: series_report(done[name], runs[name], runs[baseline]) for name in runs}
        for name in runs:
            if name != baseline:
                rows[name]["at_handoff"] = at_handoff(done[name], done[baseline])
            scaffolded = series[name][1]
            if scaffolded in runs:
                rows[name]["minus_scaffolded"] = shared.compare(runs[name], runs[scaffolded])
                rows[name]["with_bank_minus_scaffolded"] = shared.compare(runs[name], runs[scaffolded], "with_bank",
                                                                          "with_bank")
        result[world] = rows
    return result


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def markdown(result: dict) -> str:
    intro = " ".join(__doc__.split("\n\n")[1:3]).replace("\n", " ")
    lines = ["# The scaffold handed off", "", intro, "",
             f"Seeds {result['seeds']}; {shared.SPLIT}, 400 tasks a seed, paired by seed and task; "
             f"{result['machine']}; command: `{result['command']}`.", ""]
    for world, rows in result["worlds"].items():
        lines += [f"## {world}, from {WARM_STARTS[world]} warm starts", "",
                  "| series | final plain | with the advice / bank | plain − GRPO | handed off − scaffolded: plain "
                  "| with | seconds a round with the scaffold / without |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, row in rows.items():
            lines.append(f"| {name} | {shared.pct(row['plain'])} | {shared.pct(row.get('with_bank'))} "
                         f"| {shared.diff(row.get('minus_grpo'))} | {shared.diff(row.get('minus_scaffolded'))} "
                         f"| {shared.diff(row.get('with_bank_minus_scaffolded'))} "
                         f"| {seconds(row['seconds_a_round']['scaffolded'])} "
                         f"/ {seconds(row['seconds_a_round']['plain'])} |")
        handed = {name: row["at_handoff"] for name, row in rows.items() if row.get("at_handoff")}
        if handed:
            lines += ["", "Where each handed-off series stood when its scaffold stopped: its policy and GRPO's "
                      f"after the round before the hand-off, on the same {EPISODES} tasks and streams (that "
                      "round's), against the end.", "",
                      "| series | after round | plain / with the advice then | GRPO then | plain − GRPO then "
                      "| plain − GRPO at the end |", "| --- | --- | --- | --- | --- | --- |"]
            for name, then in handed.items():
                lines.append(f"| {name} | {then['after_round']} | {shared.pct(then['plain'])} / "
                             f"{shared.pct(then['with_bank'])} | {shared.pct(then['grpo'])} "
                             f"| {shared.diff(then['minus_grpo'])} | {shared.diff(rows[name]['minus_grpo'])} |")
        lines += ["", "Per seed, plain − GRPO (points): " + "; ".join(
            f"{name}: " + " ".join(f"s{s} {100 * d:+.1f}" for s, d in row["minus_grpo"]["per_seed"].items())
            for name, row in rows.items() if "minus_grpo" in row), "",
            "The training episodes' success per round (plain members; in brackets the conditioned members'), "
            "mean over seeds. GRPO's groups are 8 plain members; a scaffolded round's 4 plain and 4 conditioned.", "",
            "| series | " + " | ".join(f"round {r['round']}" for r in next(iter(rows.values()))["rounds"]) + " |",
            "| --- |" + " --- |" * len(next(iter(rows.values()))["rounds"])]
        for name, row in rows.items():
            lines.append(f"| {name} | " + " | ".join(
                ("–" if r["plain"] is None else f"{r['plain']:.1%}")
                + (f" ({r['conditioned']:.1%})" if r["conditioned"] is not None else "")
                for r in row["rounds"]) + " |")
        lines.append("")
    return "\n".join(lines)


def figure(world: str, rows: dict, path: Path, seeds: int) -> Path:
    """The training episodes' success per round, plain (solid) and conditioned (dashed), for each series."""
    curves = {name: [(r["round"], float("nan") if r["plain"] is None else r["plain"], r["conditioned"])
                     for r in row["rounds"]] for name, row in rows.items() if name in FIGURE_SERIES[world]}
    return curves_plot(curves, path, f"{world}: training episodes, {seeds} seeds",
                       xlabel="round", ylabel="training success",
                       second="conditioned members")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, action="append", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as every benchmark run evaluates, so a cached evaluation is what this one would be
    command = "benchmarks/handoff.py " + " ".join(f"--seed {s}" for s in args.seed)
    result = {"seeds": args.seed, "machine": describe_machine(), "command": command, "worlds": report(args.seed)}
    out = sweep.OUT
    (out / "handoff.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    (out / "handoff.md").write_text(markdown(result))
    for world, rows in result["worlds"].items():
        figure(world, rows, out / f"handoff_{world}.png", len(args.seed))
    print(markdown(result))


if __name__ == "__main__":
    main()
