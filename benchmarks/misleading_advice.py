"""Is bad behaviour distilled too? The oracle control with its advice made false.

The paper distils only where the experience helped (c = max(Delta, 0)) and leaves open whether guidance
that hurts reaches the plain policy anyway. Here the oracle control shows every task the household's
advice made false in the same words (``bank.oracle_advice: misleading``: the receptacle kinds where the
object does *not* usually lie, the wrong transformation), so the bank is known to mislead. The sweep's
rows m0 (the spec's update: distilled only where Delta > 0, by chance in some groups) and m1 (distilled
in every group shown the advice, weight 1) are read beside GRPO and the true oracle control under the same
two updates (o0, o1) of the same seeds, warm starts and evaluation tasks:

- the final plain policy against GRPO's and o0's, paired by seed and task, and with the false advice
  in the prompt (does the policy learn to ignore it?);
- Delta round by round, and the share of groups where it was positive (where the spec distils);
- the final success by task type, plain and with the advice (which steps the false advice costs);
- which transformation the training episodes of clean / heat / cool tasks apply, the task's own or the
  false advice's, in rounds 0, 3 and 7 (pooled over seeds);
- where the plain training episodes look first, in rounds 0, 3 and 7 (pooled over seeds): the share of
  first ``go to`` moves to a place the true advice names and to one the false advice names. A plain
  policy that drifts towards the false places has had the bad advice distilled into it; GRPO's episodes
  are the reference for chance. The same for the episodes shown the false advice (do they still follow
  it?).

    .venv/bin/python benchmarks/internalization_sweep.py --only o1 --only m0 --only m1 --seed 0 ... --seed 9
    .venv/bin/python benchmarks/misleading_advice.py --seed 0 ... --seed 9

The first command makes the runs (resumable); GRPO's and o0's are the sweep's reference runs
(``--make-grpo``, ``--make-oracle``). This script only reads finished runs. Writes
benchmarks/results/misleading_advice.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parent))
import internalization_sweep as sweep  # noqa: E402

from edge.benchmarking.learning import paired_difference, signed_points  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.envs.household.knowledge import WRONG_TRANSFORM, advised_receptacle_kinds  # noqa: E402
from edge.envs.household.tasks import TRANSFORM  # noqa: E402
from edge.envs.household.world import kind_of  # noqa: E402
from edge.guidance import misleading_advice, true_advice  # noqa: E402
from edge.rollout import Trajectory, read_rollouts  # noqa: E402

CONFIGS = ["grpo", "o0", "o1", "m0", "m1"]
"""GRPO, then the oracle control true and false, each under the spec's gate and without it: o0 / o1 the
true advice gated / ungated (``distill.gate: retrieved``), m0 / m1 the false."""
ROUNDS = (0, 3, 7)
OUT = Path("benchmarks/results")
SPLIT = sweep.SPLIT


def first_search(traj: Trajectory) -> str | None:
    """The receptacle kind of the episode's first ``go to`` move; None if it never moved."""
    for step in traj.steps:
        if step.decision.action.startswith("go to "):
            return kind_of(step.decision.action[len("go to "):])
    return None


def count_choices(folders: list[Path], judge: Callable[[Trajectory], tuple[bool, bool] | None],
                  rounds: tuple[int, ...] = ROUNDS) -> dict[str, dict]:
    """Per round, pooled over ``folders`` (one run per seed) and per kind of episode (plain, or shown the
    advice): of the episodes ``judge`` reads (it returns None for the others), the share where it found
    what the true advice says, the share where it found what the false advice says, and their number."""
    out: dict[str, dict] = {}
    for k in rounds:
        counts = {kind: {"true": 0, "false": 0, "episodes": 0} for kind in ("plain", "advised")}
        for folder in folders:
            for traj in read_rollouts(folder / f"round_{k:03d}" / "rollouts.parquet", text_only=True):
                judged = judge(traj)
                if judged is None:
                    continue
                c = counts["advised" if traj.conditioned else "plain"]
                c["episodes"] += 1
                c["true"] += judged[0]
                c["false"] += judged[1]
        out[str(k)] = {kind: {"true": c["true"] / c["episodes"], "false": c["false"] / c["episodes"],
                              "episodes": c["episodes"]} if c["episodes"] else None for kind, c in counts.items()}
    return out


def first_search_places(traj: Trajectory) -> tuple[bool, bool] | None:
    """Whether the episode's first move went to a place the true advice names, and to one the false advice
    names; None if it never moved."""
    first = first_search(traj)
    if first is None:
        return None
    return (first in advised_receptacle_kinds(true_advice(traj.task)),
            first in advised_receptacle_kinds(misleading_advice(traj.task)))


def applied_transformations(traj: Trajectory) -> tuple[bool, bool] | None:
    """Whether an episode of a clean / heat / cool task applied its own transformation at least once, and
    whether it applied the one the false advice names; None for the other task types."""
    verb = TRANSFORM.get(traj.task.spec["goal"]["type"])
    if verb is None:
        return None
    actions = [step.decision.action for step in traj.steps]
    return (any(a.startswith(f"{verb} ") for a in actions),
            any(a.startswith(f"{WRONG_TRANSFORM[verb]} ") for a in actions))


def first_searches(folders: list[Path], rounds: tuple[int, ...] = ROUNDS) -> dict[str, dict]:
    """Where the episodes look first: the share of first moves to a place the true advice names, to one the
    false advice names (``count_choices``)."""
    return count_choices(folders, first_search_places, rounds)


def transformations(folders: list[Path], rounds: tuple[int, ...] = ROUNDS) -> dict[str, dict]:
    """Of the episodes whose task asks for a transformation (clean, heat, cool): the share that applied the
    task's own, and the share that applied the one the false advice names (``count_choices``)."""
    return count_choices(folders, applied_transformations, rounds)


def success_by_type(folders: list[Path]) -> dict[str, dict[str, float]]:
    """Per condition (plain; with the run's advice, where it has one) and task type: the final evaluation's
    success, mean over ``folders`` (one run per seed). Which steps the advice costs or gives."""
    evals = [json.loads(sorted(f.glob("round_*/eval.json"))[-1].read_text())[SPLIT] for f in folders]
    return {condition: {t: fmean(e[condition]["success_by_type"][t] for e in evals)
                        for t in evals[0][condition]["success_by_type"]}
            for condition in ("plain", "with_bank") if condition in evals[0]}


def delta_by_round(runs: dict[int, dict]) -> list[dict]:
    """Per round, over seeds: Delta (advised − plain success in the groups shown the advice) and the share
    of those groups where it was positive."""
    rounds = sorted({r["round"] for run in runs.values() for r in run["bank_rounds"]})
    out = []
    for k in rounds:
        rs = [r for run in runs.values() for r in run["bank_rounds"] if r["round"] == k and r["hit_rate"]]
        out.append({"round": k, "delta": fmean(r["delta_mean"] for r in rs),
                    "positive_share": fmean(r["delta_positive_share"] for r in rs)})
    return out


def compare(ours: dict[int, dict], theirs: dict[int, dict], seeds: list[int], metric: str = "plain",
            their_metric: str = "plain") -> dict:
    """``ours`` − ``theirs`` on the final plain success (or, ``metric`` "with_bank", ours with its advice;
    ``their_metric`` likewise for theirs, by default their plain policy), paired by seed and task."""
    return paired_difference(
        [ours[s]["final"][f"{SPLIT}_{metric}"] for s in seeds],
        [theirs[s]["final"][f"{SPLIT}_{their_metric}"] for s in seeds], seeds,
        [(ours[s]["final_tasks"][SPLIT][metric], theirs[s]["final_tasks"][SPLIT][their_metric]) for s in seeds])


def report(configs: list[str], seeds: list[int], reference_runs: Path) -> dict:
    runs = {c: sweep.runs_of(c, seeds, reference_runs) for c in configs}
    out: dict = {"seeds": seeds, "machine": describe_machine(), "configs": {}}
    for c in configs:
        finals = [runs[c][s]["final"] for s in seeds]
        row = {"asks": "GRPO" if c == sweep.GRPO else sweep.CONFIGS[c][0],
               "plain": fmean(f[f"{SPLIT}_plain"] for f in finals),
               "first_searches": first_searches(folders := [sweep.run_folder(c, s, reference_runs) for s in seeds]),
               "transformations": transformations(folders), "success_by_type": success_by_type(folders)}
        if c != sweep.GRPO:
            row["with_advice"] = fmean(f[f"{SPLIT}_with_bank"] for f in finals)
            row["with_advice_minus_plain"] = compare(runs[c], runs[c], seeds, "with_bank")
            row["delta_by_round"] = delta_by_round(runs[c])
        row["against"] = {other: compare(runs[c], runs[other], seeds) for other in configs[:configs.index(c)]}
        out["configs"][c] = row
    return out


def _share(x: dict | None, which: str) -> str:
    return "–" if x is None else f"{x[which]:.0%}"


def choice_table(rows: dict, key: str, title: str, caption: str) -> list[str]:
    """A ``count_choices`` result of every configuration as a table: true / false share per round and kind."""
    lines = ["", f"## {title}", "", caption, "",
             "| config | " + " | ".join(f"plain r{k}" for k in ROUNDS) + " | "
             + " | ".join(f"advised r{k}" for k in ROUNDS) + " |", "|---|" + "---|" * (2 * len(ROUNDS))]
    for c, r in rows.items():
        counted = r[key]
        cells = [f"{_share(counted[str(k)][kind], 'true')} / {_share(counted[str(k)][kind], 'false')}"
                 if counted[str(k)][kind] else "–" for kind in ("plain", "advised") for k in ROUNDS]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    return lines


def command_args(result: dict, default: list[str] = CONFIGS) -> str:
    """The command line that makes ``result`` again (``--config`` only where not the ``default``, and
    ``--name`` where the report was written under another name)."""
    configs = list(result["configs"])
    return " ".join([f"--seed {s}" for s in result["seeds"]]
                    + ([f"--config {c}" for c in configs] if configs != default else [])
                    + ([f"--name {result['name']}"] if result.get("name") else []))


def markdown(result: dict) -> str:
    seeds, rows = result["seeds"], result["configs"]
    lines = ["# Is bad behaviour distilled too? The oracle control with its advice made false (household, test_seen)",
             "", f"Seeds {', '.join(map(str, seeds))}; each configuration from the same warm starts, evaluated on the "
             "same 400 tasks and streams (configurations in internalization.md). m0 and m1 are the oracle control "
             "shown the household's advice made false (`bank.oracle_advice: misleading`): m0 distils where it "
             "helped (the spec, c = max(Delta, 0)), m1 wherever it was shown (`distill.gate: retrieved`); o0 and o1 "
             "are the true advice under the same two updates. Differences in points, paired by seed "
             "and task, the mean over seeds with its 95% Student-t interval. Command: "
             f"`.venv/bin/python benchmarks/misleading_advice.py {command_args(result)}`.", "",
             f"Machine: {result['machine']}.", ""]
    lines += finals_table(rows, "with_advice", "with its advice", "with_advice_minus_plain")
    lines += ["", "## Delta round by round", "",
              "Advised − plain success in the groups shown the advice, mean over seeds (in brackets: the share of "
              "those groups where it was positive, where the spec distils).", "",
              "| config | " + " | ".join(f"r{x['round']}" for x in next(
                  r["delta_by_round"] for r in rows.values() if "delta_by_round" in r)) + " |"]
    lines.append("|---|" + "---|" * len(lines[-1].split("|")[2:-1]))
    for c, r in rows.items():
        if "delta_by_round" in r:
            lines.append(f"| {c} | " + " | ".join(f"{x['delta']:+.2f} ({x['positive_share']:.0%})"
                                                  for x in r["delta_by_round"]) + " |")
    lines += choice_table(rows, "first_searches", "Where the training episodes look first",
                           "Of the training episodes that moved, pooled over seeds: the share whose first `go to` went "
                           "to a place the true advice names / one the false advice names (plain members; in the "
                           "second half, the members shown the advice).")
    lines += choice_table(rows, "transformations", "Which transformation the training episodes apply",
                           "Of the training episodes whose task asks for a transformation (clean, heat, cool), pooled "
                           "over seeds: the share that applied the task's own / the one the false advice names (heat "
                           "for clean, cool for heat, clean for cool), plain members and members shown the advice.")
    lines += type_table(rows, "Mean over seeds: plain / with the run's advice (the true advice for o…, the false "
                              "for m…).")
    return "\n".join(lines) + "\n"


def finals_table(rows: dict, with_key: str, with_title: str, minus_plain_key: str | None = None) -> list[str]:
    """What each configuration asks, as a list (the texts are too long for a table's cell), then the
    table: every configuration's final plain success, its success with its advice or bank (``with_key``; –
    for GRPO), with ``minus_plain_key`` the paired difference of the two, and the paired differences to
    every configuration listed before it."""
    others = list(rows)[:-1]
    extra = ["with advice − plain"] if minus_plain_key else []
    lines = [f"- **{c}**: {r['asks']}" for c, r in rows.items()]
    lines += ["", "| " + " | ".join(["config", "plain", with_title, *extra, *(f"− {c}" for c in others)]) + " |",
              "|---" * (3 + len(extra) + len(others)) + "|"]
    for c, r in rows.items():
        cells = [c, f"{r['plain']:.1%}", f"{r[with_key]:.1%}" if with_key in r else "–"]
        if minus_plain_key:
            cells.append(signed_points(r[minus_plain_key]) if minus_plain_key in r else "–")
        cells += [signed_points(r["against"][o]) if o in r["against"] else "" for o in others]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def type_table(rows: dict, caption: str) -> list[str]:
    """The final success by task type of every configuration (``success_by_type``), plain / with its advice."""
    types = list(next(iter(rows.values()))["success_by_type"]["plain"])
    lines = ["", "## Final success by task type", "", caption, "",
             "| config | " + " | ".join(t.replace("_", " ") for t in types) + " |", "|---|" + "---|" * len(types)]
    for c, r in rows.items():
        by = r["success_by_type"]
        cells = [f"{by['plain'][t]:.0%}" + (f" / {by['with_bank'][t]:.0%}" if "with_bank" in by else "") for t in types]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    return lines


def main(doc: str = __doc__, configs: list[str] = CONFIGS, name: str = "misleading_advice",
         make_report: Callable = report, make_markdown: Callable = markdown,
         make_figures: Callable | None = None) -> None:
    """The command line of a script that reads sweep rows beside GRPO (this one's, and
    ``planted_entries.py``'s with its own report, table and figure): ``--seed``, ``--config``,
    ``--reference-runs``, ``--name``; writes benchmarks/results/<name>.{json,md} and, with ``make_figures``
    (called with the result, the folder and the name), its figures."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--seed", type=int, action="append", required=True)
    parser.add_argument("--config", action="append", help=f"configurations, GRPO first (default {' '.join(configs)})")
    parser.add_argument("--reference-runs", type=Path, default=Path("benchmarks/runs"))
    parser.add_argument("--name", default=name)
    args = parser.parse_args()
    chosen = args.config or configs
    if chosen[0] != sweep.GRPO or any(c not in sweep.CONFIGS for c in chosen[1:]):
        parser.error(f"--config: GRPO first, then configurations of the sweep; got {chosen}")
    result = make_report(chosen, args.seed, args.reference_runs)
    if args.name != name:
        result["name"] = args.name
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (OUT / f"{args.name}.md").write_text(make_markdown(result))
    if make_figures is not None:
        make_figures(result, OUT, args.name)
    print(make_markdown(result))


if __name__ == "__main__":
    main()
