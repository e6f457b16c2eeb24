"""A false entry in the learned bank: does EDGE's co-evolution remove it, and what does it cost meanwhile?

The spec says the bank prunes what the policy no longer needs and distils only what helped; the paper
leaves open whether bad behaviour gets through. Session 35 answered it for the oracle control (a bank
that is false everywhere, ``misleading_advice.md``). Here the bank is EDGE's own (sweep row e26, its best
learned-bank options so far) with one false entry per transformation type planted before round 0
(``bank.seed_file = data/seeds/household_false_steps.jsonl``: clean tasks are told to heat, heat tasks to
cool, cool tasks to clean). A planted entry is credited and pruned like a written one but never revised,
so it is the false guidance an LM synthesizer or a careless curator could leave in a bank. Rows:

- e27: planted, e26's pruning (only stale entries and the size cap): nothing can remove an entry that is
  retrieved;
- e28: planted, the spec's four rules: can ``not_helping`` (utility <= 0 after 4 uses) remove it?
- e29: the true steps planted instead (``household_true_steps.jsonl``), the control for the planting itself;
- e30: planted, the spec's collection and pruning (every group that retrieves is split, so Delta can be
  negative; e26 shows the block only where the plain members all failed, so its Delta never is);
- e31 / e32: e26 / e27 with half of the plain members deciding where the block goes and Delta measured
  against the other half (``bank.decided_by: half_plain``), so that it can be negative.
- e33 / e34: e32 / e31 with the spec's four pruning rules, the internalized rule asking for an earlier
  lift the plain members now reach (``bank.prune.internalized_needs: lift``): the not-helping rule reads
  half_plain's Delta, and an entry that never lifted its groups leaves as not helping, not internalized.
- e35: e30 with nothing planted, e30's own control.
- e36 / e37: e27 / e26 with distillation off (``distill.coef: 0``): does the planted step reach the plain
  policy through the distillation or through the advised members' own updates?

For each row, beside e26 and GRPO of the same seeds, warm starts and evaluation tasks:

- the final plain policy and the policy with its bank, paired by seed and task;
- each planted entry's fate, seed by seed, from the run's ``bank_seed.json``, the bank snapshots and the
  groups' scores: the round it left the active set and why, its uses, its utility, and Delta
  (advised − plain success) of the groups shown it; then whether the bank wrote the true step for the type;
- how much of the run's distillation drew on a block holding a planted entry (``planted_distillation``): the
  states the gate passed from such groups and their weight, rebuilt as the update counted them;
- which transformation the training episodes of clean / heat / cool tasks apply (the task's own, or the
  one the planted entry names), plain and advised, in rounds 0, 3 and 7;
- the final success by task type.

    .venv/bin/python benchmarks/internalization_sweep.py --only e27 --only e28 --only e29 --only e30 \\
        --only e31 --only e32 --only e33 --only e34 --only e35 --only e36 --only e37 --seed 0 ... --seed 9
    .venv/bin/python benchmarks/planted_entries.py --seed 0 ... --seed 9

The first command makes the runs (resumable); this script only reads finished runs and writes
benchmarks/results/planted_entries.{md,json}.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from statistics import fmean, median

sys.path.insert(0, str(Path(__file__).resolve().parent))
import internalization_sweep as sweep  # noqa: E402
import misleading_advice as misleading  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from edge.algorithms.contribution import GroupContribution  # noqa: E402
from edge.algorithms.distill import distills_member, group_weights, scheduled_coef  # noqa: E402
from edge.bank.coevolve import prune_rules  # noqa: E402
from edge.bank.entry import BankEntry  # noqa: E402
from edge.bank.pruning import PruneRules, caught_up, helped_then_absorbed, not_helping  # noqa: E402
from edge.bank.store import read_snapshot  # noqa: E402
from edge.benchmarking.learning import paired_difference, signed_points  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.config import method_settings  # noqa: E402
from edge.envs.base import EVERY_SUBJECT  # noqa: E402
from edge.runs import read_run_params  # noqa: E402

CONFIGS = ["grpo", "e26", "e27", "e28", "e29", "e30", "e31", "e32", "e33", "e34", "e35", "e36", "e37"]
"""GRPO, e26 (nothing planted), then the planted rows."""
PLANTING = {"e27": ("e26", "e26's options: the block where all plain members failed, every plain member deciding"),
            "e28": ("e26", "e26's options with the spec's four pruning rules"),
            "e30": ("e35", "the spec's collection and pruning"),
            "e32": ("e31", "e26's options, half of the plain members deciding (half_plain)"),
            "e33": ("e34", "half_plain with the spec's four pruning rules"),
            "e36": ("e37", "e26's options, distillation off")}
"""Planted row -> (the same options with nothing planted, what they are): what the planting costs there."""
FIRST_PLANTING = "e27"
"""The first planted row (e26's options): every other setting's cost is also read against its cost."""
OUT = Path("benchmarks/results")
SPLIT = sweep.SPLIT


def planted_signatures(folder: Path) -> dict[str, str]:
    """Entry id -> signature of every entry the run's ``bank.seed_file`` planted (``bank_seed.json``)."""
    record = json.loads((folder / "bank_seed.json").read_text())
    return {e["id"]: e["signature"] for e in record["entries"]}


def lift_evidence(entry: BankEntry, own_rules: PruneRules, lift_rules: PruneRules) -> bool | None:
    """For an entry pruned as ``internalized``: did it show the lift ``internalized_needs: lift`` asks of that
    label? For one pruned as ``not_helping`` under ``lift`` with a utility the not-helping test passes over:
    False (it left as a caught-up entry that never lifted its groups). None otherwise."""
    if entry.prune_reason == "internalized":
        return helped_then_absorbed(entry, lift_rules)
    if (entry.prune_reason == "not_helping" and own_rules.internalized_needs == "lift"
            and not not_helping(entry, own_rules) and caught_up(entry, own_rules)):
        return False
    return None


def entry_fates(folder: Path) -> dict[str, dict]:
    """Per planted entry of one run: its status after each round (``round_<k>/bank.parquet``); the round
    it left the active set and the reason (None if it stayed); its uses and utility when it left or at the
    end; per round, the groups shown it and their Delta (``scores.json``); and whether the bank ended
    with an active entry of its own (template-written) for the same signature: the true step, written once
    the planted one was gone. An entry pruned as ``internalized`` is checked against the lift that
    ``bank.prune.internalized_needs: lift`` asks of the label (``lifted``; None for other reasons): the
    same entries leave either way, so the check says what the runs made under ``credit`` would have read.
    """
    planted = planted_signatures(folder)
    own_rules = prune_rules(read_run_params(folder).bank)
    lift_rules = replace(own_rules, internalized_needs="lift")
    rounds = sorted(int(p.name.split("_")[1]) for p in folder.glob("round_*") if (p / "bank.parquet").exists())
    fates = {i: {"task_type": signature.split("|")[0], "left_round": None, "reason": None, "lifted": None,
                 "groups": [], "deltas": []} for i, signature in planted.items()}
    last: list[BankEntry] = []
    for k in rounds:
        last = read_snapshot(folder / f"round_{k:03d}" / "bank.parquet")
        by_id = {e.id: e for e in last}
        groups = json.loads((folder / f"round_{k:03d}" / "scores.json").read_text())["groups"]
        for i, fate in fates.items():
            shown = [g["delta"] for g in groups if i in g["entry_ids"]]
            fate["groups"].append(len(shown))
            fate["deltas"] += shown
            entry = by_id[i]
            if fate["left_round"] is None:
                fate["uses"], fate["utility"] = entry.uses, entry.utility
                if entry.status != "active":
                    fate["left_round"], fate["reason"] = k, entry.prune_reason or entry.status
                    fate["lifted"] = lift_evidence(entry, own_rules, lift_rules)
    for i, fate in fates.items():
        pattern = planted[i].split("|")[2]
        own = [e for e in last if e.status == "active" and e.id != i and e.task_type == fate["task_type"]
               and e.signature.endswith(f"|{pattern}")]
        # The bank's own step: written for the whole type (only once the planted entry is gone: it covers
        # the signature), or for one object kind (a failure about that object; it then replaces the type's
        # entry in that object's block).
        fate["own_entry_at_end"] = any(e.key == EVERY_SUBJECT for e in own)
        fate["own_object_entries_at_end"] = sum(e.key != EVERY_SUBJECT for e in own)
        fate["delta_mean"] = fmean(fate["deltas"]) if fate["deltas"] else None
        fate["delta_positive_share"] = (sum(d > 0 for d in fate["deltas"]) / len(fate["deltas"])
                                        if fate["deltas"] else None)
    return fates


def planted_distillation(folder: Path) -> dict:
    """How much of one run's distillation drew on blocks that held a planted entry. The distilled states are
    rebuilt from each round's scores (the groups' credit, through the run's own ``distill.gate``) and rollouts
    (``distill.states``: every step of the plain members, of the conditioned ones, or both, in a group the gate
    passes), as ``distill_samples`` counts them in ``train_metrics.json``. Per round and in all: the groups
    shown a planted entry, how many of them the gate passed, the states distilled from them, their weight
    (sum over those states of the group's weight g: what scales the reverse-KL pull), and that weight's share
    of all the run's distillation weight. The teacher of such a state saw the planted entry's words. A run
    that does not distil (``distill.coef: 0``) counts nothing, nor does a round whose scheduled coefficient
    (``distill.coef_decay_rounds``) has fallen to 0."""
    params = read_run_params(folder)
    coef = method_settings(params).distill_coef
    if params.bank.block_follows_progress:
        raise ValueError(f"{folder}: bank.block_follows_progress drops states the block no longer covers, which "
                         "this count does not follow")
    planted = set(planted_signatures(folder))
    rounds = sorted(int(p.name.split("_")[1]) for p in folder.glob("round_*") if (p / "scores.json").exists())
    per_round = []
    for k in rounds:
        round_dir = folder / f"round_{k:03d}"
        groups = [GroupContribution(**g) for g in json.loads((round_dir / "scores.json").read_text())["groups"]]
        distils = scheduled_coef(coef, params.distill.coef_decay_rounds, k) > 0
        weights = group_weights(groups, params.distill.gate) if distils else {}
        table = pq.read_table(round_dir / "rollouts.parquet", columns=["group_id", "conditioned"]).to_pylist()
        steps: dict[str, int] = {}
        for row in table:
            if distills_member(row["conditioned"], params.distill.states):
                steps[row["group_id"]] = steps.get(row["group_id"], 0) + 1
        shown = {g.group_id for g in groups if planted & set(g.entry_ids)}
        passed = shown & set(weights)
        per_round.append({
            "round": k, "groups_shown": len(shown), "groups_distilled": len(passed),
            "states": sum(steps.get(gid, 0) for gid in weights),
            "planted_states": sum(steps.get(gid, 0) for gid in passed),
            "weight": sum(g * steps.get(gid, 0) for gid, g in weights.items()),
            "planted_weight": sum(weights[gid] * steps.get(gid, 0) for gid in passed)})
    total = {key: sum(r[key] for r in per_round)
             for key in ("groups_shown", "groups_distilled", "states", "planted_states", "weight", "planted_weight")}
    total["planted_weight_share"] = total["planted_weight"] / total["weight"] if total["weight"] else None
    return {"rounds": per_round, "total": total}


def distillation_summary(by_seed: dict[int, dict]) -> dict:
    """Over seeds: groups shown a planted entry and the share the gate passed; per run, the states distilled
    under a planted entry and their weight; the mean share of the distillation weight they carried."""
    totals = [d["total"] for d in by_seed.values()]
    shown = sum(t["groups_shown"] for t in totals)
    shares = [t["planted_weight_share"] for t in totals if t["planted_weight_share"] is not None]
    return {"groups_shown": shown,
            "distilled_share": sum(t["groups_distilled"] for t in totals) / shown if shown else None,
            "planted_states_per_run": fmean(t["planted_states"] for t in totals),
            "planted_weight_per_run": fmean(t["planted_weight"] for t in totals),
            "planted_weight_share": fmean(shares) if shares else None}


def fate_summary(fates_by_seed: dict[int, dict[str, dict]]) -> dict[str, dict]:
    """Per planted task type, over seeds: in how many seeds it left the active set, by which reason, the
    median round it left (of those), the groups shown it, their Delta and share positive, and in how many
    seeds the bank ended with its own entry for the step."""
    out: dict[str, dict] = {}
    types = sorted({f["task_type"] for fates in fates_by_seed.values() for f in fates.values()})
    for t in types:
        rows = [f for fates in fates_by_seed.values() for f in fates.values() if f["task_type"] == t]
        left = [f for f in rows if f["left_round"] is not None]
        deltas = [d for f in rows for d in f["deltas"]]
        reasons: dict[str, int] = {}
        for f in left:
            reason = f["reason"]
            if f.get("lifted") is False:
                reason = "internalized without a lift" if reason == "internalized" else f"{reason}: level, no lift"
            reasons[reason] = reasons.get(reason, 0) + 1
        out[t] = {"seeds": len(rows), "left": len(left), "reasons": reasons,
                  "median_left_round": median(f["left_round"] for f in left) if left else None,
                  "groups_shown": sum(sum(f["groups"]) for f in rows),
                  "delta_mean": fmean(deltas) if deltas else None,
                  "delta_positive_share": sum(d > 0 for d in deltas) / len(deltas) if deltas else None,
                  "own_entry_at_end": sum(f["own_entry_at_end"] for f in rows),
                  "own_object_entries_at_end": fmean(f["own_object_entries_at_end"] for f in rows)}
    return out


def still_active(fates_by_seed: dict[int, dict[str, dict]]) -> list[float]:
    """The share of the planted entries, pooled over seeds, still active after 0, 1, ... rounds of training:
    1.0 before round 0, then after each round's update (an entry that left in round k's snapshot is gone
    after k + 1 rounds)."""
    fates = [f for by_id in fates_by_seed.values() for f in by_id.values()]
    if not fates:
        return []
    rounds = max(len(f["groups"]) for f in fates)
    return [sum(f["left_round"] is None or f["left_round"] >= done for f in fates) / len(fates)
            for done in range(rounds + 1)]


def survival_figure(result: dict, folder: Path, name: str) -> list[Path]:
    """One line per planted configuration: the share of its planted entries still in the active set."""
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for c, r in result["configs"].items():
        if "still_active" in r:
            ax.plot(range(len(r["still_active"])), r["still_active"], "o-", label=c)
    ax.set(xlabel="rounds of training done", ylabel="planted entries still active", ylim=(0, 1.05),
           title=f"planted entries in the bank (seeds {', '.join(map(str, result['seeds']))})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = folder / f"{name}_still_active.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def report(configs: list[str], seeds: list[int], reference_runs: Path) -> dict:
    runs = {c: sweep.runs_of(c, seeds, reference_runs) for c in configs}
    out: dict = {"seeds": seeds, "machine": describe_machine(), "configs": {}}
    for c in configs:
        folders = [sweep.run_folder(c, s, reference_runs) for s in seeds]
        finals = [runs[c][s]["final"] for s in seeds]
        row = {"asks": "GRPO" if c == sweep.GRPO else sweep.CONFIGS[c][0],
               "plain": fmean(f[f"{SPLIT}_plain"] for f in finals),
               "transformations": misleading.transformations(folders),
               "success_by_type": misleading.success_by_type(folders)}
        if c != sweep.GRPO:
            row["with_bank"] = fmean(f[f"{SPLIT}_with_bank"] for f in finals)
        if (folders[0] / "bank_seed.json").exists():
            fates = {s: entry_fates(f) for s, f in zip(seeds, folders, strict=True)}
            row["fates"] = {str(s): fates[s] for s in seeds}
            row["fate_summary"] = fate_summary(fates)
            row["still_active"] = still_active(fates)
            distilled = {s: planted_distillation(f) for s, f in zip(seeds, folders, strict=True)}
            row["distillation"] = {str(s): distilled[s] for s in seeds}
            row["distillation_summary"] = distillation_summary(distilled)
        row["against"] = {other: misleading.compare(runs[c], runs[other], seeds)
                          for other in configs[:configs.index(c)]}
        out["configs"][c] = row
    out["planting_costs"] = planting_costs(runs, seeds)
    return out


def planting_costs(runs: dict[str, dict[int, dict]], seeds: list[int]) -> dict:
    """Per planted row whose unplanted control ran too: planted − control, plain policy against plain policy
    and final bank against final bank, paired by seed and task; and the plain cost minus ``FIRST_PLANTING``'s,
    paired by seed (``minus_first``: is the cost in this setting smaller? For e36, distillation off, a
    positive figure is the part of e27's cost that the distillation carries)."""
    def cost(planted: str, control: str, metric: str) -> dict:
        return misleading.compare(runs[planted], runs[control], seeds, metric, metric)

    out = {"pairs": {p: {"control": c, "setting": setting, "plain": cost(p, c, "plain"),
                         "with_bank": cost(p, c, "with_bank")}
                     for p, (c, setting) in PLANTING.items() if p in runs and c in runs}}
    first = out["pairs"].get(FIRST_PLANTING)
    for p, c in out["pairs"].items():
        if first and p != FIRST_PLANTING:
            c["minus_first"] = paired_difference([c["plain"]["per_seed"][str(s)] for s in seeds],
                                                 [first["plain"]["per_seed"][str(s)] for s in seeds], seeds)
    return out


def _reasons(r: dict) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(r.items())) or "–"


def markdown(result: dict) -> str:
    seeds, rows = result["seeds"], result["configs"]
    lines = ["# A false entry in the learned bank: removed, and at what cost? (household, test_seen)", "",
             f"Seeds {', '.join(map(str, seeds))}; each row from the same warm starts, evaluated on the same 400 "
             "tasks and streams (rows in internalization.md). e27-e30 and e32 are e26 (EDGE with its own bank, its "
             "best options so far) with one entry per transformation type planted before round 0 "
             "(`bank.seed_file`): the false step (clean tasks told to heat, heat to cool, cool to clean), e29 the "
             "true one. e27 prunes as e26 does (stale entries and the size cap only), e28 with the spec's four "
             "rules; e30 is the spec's collection and pruning (every retrieving group split, so Delta can be "
             "negative; e26-e29 show the block only where all plain members failed, so Delta never is); e31 and "
             "e32 are e26 and e27 with Delta measured against plain members that did not decide the split "
             "(`bank.decided_by: half_plain`); e33 and e34 are e32 and e31 with the spec's four rules, labelled "
             "with `bank.prune.internalized_needs: lift`; e35 is e30 with nothing planted; e36 and e37 are e27 and "
             "e26 with distillation off (`distill.coef: 0`). "
             "A planted entry is never revised; only pruning removes it. Differences in points, "
             "paired by seed and task, the mean over seeds with its 95% Student-t interval. Command: "
             f"`.venv/bin/python benchmarks/planted_entries.py {misleading.command_args(result, CONFIGS)}`.", "",
             f"Machine: {result['machine']}.", ""]
    lines += misleading.finals_table(rows, "with_bank", "with its bank")
    costs = result.get("planting_costs", {})
    if costs.get("pairs"):
        lines += ["", "## What the planting costs, setting by setting", "",
                  "Each planted row against the same options with nothing planted, paired by seed and task: the "
                  "plain policy against the plain policy, the final bank against the final bank (each run's own); "
                  f"then the plain cost minus {FIRST_PLANTING}'s, paired by seed: above zero, planting costs less "
                  "in that setting than under e26's options (for e36, distillation off: the part of "
                  f"{FIRST_PLANTING}'s cost that the distillation carries).", "",
                  f"| planted | control | setting | plain | with its bank | plain cost − {FIRST_PLANTING}'s |",
                  "|---|---|---|---|---|---|"]
        for p, c in costs["pairs"].items():
            against_first = signed_points(c["minus_first"]) if "minus_first" in c else "–"
            lines.append(f"| {p} | {c['control']} | {c['setting']} | {signed_points(c['plain'])} | "
                         f"{signed_points(c['with_bank'])} | {against_first} |")
    name = result.get("name", "planted_entries")
    lines += ["", "## What became of each planted entry", "",
              f"![planted entries still active, round by round]({name}_still_active.png)", "",
              "Over seeds: in how many the entry left the active set, why (\"internalized without a lift\": the "
              "spec's label, where the entry's groups never had conditioned success `bank.prune.lift_margin` "
              "above plain before the window, or the plain members did not reach that level; "
              "`internalized_needs: lift` would have called it not helping, and with the not-helping rule on, as "
              "in every row here, it would have left in the same round; \"not_helping: level, no lift\": such an "
              "entry under `lift`, whose utility alone would not have removed it), and the median round it left "
              "(rounds 0-7; an entry pruned after round k's update is shown from round k + 1 on); the training groups "
              "shown it (all rounds) and their Delta, advised − plain success, with the share of groups where it "
              "was positive (where the spec distils); in how many seeds the bank ended with its own entry for the "
              "type's step (written once the planted entry was gone: until then it covers the signature), and how "
              "many entries of its own for the step of one object kind it ended with, mean over seeds (those "
              "replace the type's entry in that object's block).", "",
              "| config | planted for | left (of seeds) | why | median round | groups shown | Delta (> 0) | "
              "own type entry at end | own object entries at end |", "|---|---|---|---|---|---|---|---|---|"]
    for c, r in rows.items():
        for t, f in (r.get("fate_summary") or {}).items():
            delta = "–" if f["delta_mean"] is None else f"{f['delta_mean']:+.2f} ({f['delta_positive_share']:.0%})"
            lines.append(f"| {c} | {t.replace('_', ' ')} | {f['left']} / {f['seeds']} | {_reasons(f['reasons'])} | "
                         f"{'–' if f['median_left_round'] is None else format(f['median_left_round'], 'g')} | "
                         f"{f['groups_shown']} | {delta} | {f['own_entry_at_end']} / {f['seeds']} | "
                         f"{f['own_object_entries_at_end']:.1f} |")
    lines += ["", "## How much distillation drew on a planted entry", "",
              "The spec distils the teacher, the policy with the group's block in its prompt, into the plain policy "
              "on the states of the groups its gate passes (`distill.gate: credit`: Delta > 0, weighted by c = "
              "Delta). A group whose block held a planted entry has a teacher that read the planted words. Rebuilt "
              "from each round's scores and rollouts as the run's update counted them: the groups shown a planted "
              "entry (all rounds, all seeds) and the share the gate passed (none in a run that does not distil); per "
              "run, the states distilled from those groups and their weight (the sum of c over them, what scales "
              "the pull towards the teacher); and the share of all the run's distillation weight they carried, mean "
              "over seeds.", "",
              "| config | groups shown | passed the gate | states distilled / run | their weight / run | "
              "share of the distillation weight |", "|---|---|---|---|---|---|"]
    for c, r in rows.items():
        d = r.get("distillation_summary")
        if d:
            passed = "–" if d["distilled_share"] is None else f"{d['distilled_share']:.0%}"
            share = "–" if d["planted_weight_share"] is None else f"{d['planted_weight_share']:.1%}"
            lines.append(f"| {c} | {d['groups_shown']} | {passed} | {d['planted_states_per_run']:.0f} | "
                         f"{d['planted_weight_per_run']:.1f} | {share} |")
    lines += misleading.choice_table(
        rows, "transformations", "Which transformation the training episodes apply",
        "Of the training episodes whose task asks for a transformation (clean, heat, cool), pooled over seeds: the "
        "share that applied the task's own / the one the false entry names (heat for clean, cool for heat, clean "
        "for cool), plain members and members shown a block. For GRPO, e26 and e29 the second figure is the rate "
        "of that wrong step without any false guidance.")
    lines += misleading.type_table(rows, "Mean over seeds: plain / with the run's final bank.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    misleading.main(__doc__, CONFIGS, "planted_entries", report, markdown, survival_figure)
