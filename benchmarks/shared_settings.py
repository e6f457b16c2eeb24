"""Settings every method shares, which change the warm start too: GRPO, the oracle control and EDGE under each.

Some settings cannot be compared on the learning benchmark's warm starts, because the warm start itself
depends on them (its demonstrations are cloned in the prompt format the runs will use). Each such setting
gets its own warm starts per seed, GRPO is trained from them at the default budget, and the oracle control
with o23's update (``--oracle``) and EDGE with e22's bank (``--edge``), so that a method's lead over GRPO is
read within one setting and each is also compared with itself under the benchmark's settings
(``reference``):

- ``history2``, ``history3`` (``policy.history_steps``): the household's observations never say what the
  agent holds (``You arrive at tvstand 1. On the tvstand 1, you see ...``). With one past step in the
  prompt (every run before session 28), two steps after ``take watch 1 from sidetable 2`` a policy cannot
  tell whether it is still looking for the watch or taking it to the target; "not placed" (held, never put
  in the target) is a fifth of all episodes.
- ``follow`` (``bank.block_follows_progress``): the block drops the find advice once the object is in
  hand and the type's step once taken; the warm start's advised episodes are shown the block that way.
- ``experts`` (``warmup.noisy_expert_episodes`` 150 instead of 30): ``follow``'s warm start also clones what
  the advised demonstrator does after the take with a plain prompt; more plain demonstrations by the competent
  demonstrator ask whether that alone is what helps.
- ``experts300`` (300): how far more of them carry GRPO, and whether the advice still adds anything to a warm
  start that has seen where objects lie in twice as many episodes. The settings that change only this field
  are drawn against it in shared_settings_experts.png.
- ``moved``, ``moved150`` (a world that changed): the runs train and evaluate on ``household_moved``, the same
  tasks with every object kind lying mostly in other receptacle kinds, from the warm starts of ``reference``
  (N = 30) and ``experts`` (N = 150), made in the usual household. What the warm start knows about where
  things lie is now wrong, and the oracle's advice names the new places: does a scaffold that carries what
  changed speed the adaptation, and does EDGE's bank learn it? Compared within the setting only (their tasks
  are not the reference's).
- ``reading150``, ``moved_reading150``: ``experts``' warm start with its advised demonstrations played in
  ``household_shuffled`` (``warmup.advised_env``), where each task's object lies where only its advice says,
  so that the warm start learns to read the advice instead of the usual places it repeats; then runs on the
  moved household from those warm starts.
- ``moved_reading150_handoff``: ``moved_reading150`` with the scaffold handed off after round 3
  (``bank.rho_schedule: handoff``): from round 4 on the methods with experience retrieve nothing and take GRPO's
  update. There the oracle control leads GRPO after round 3 on every seed and ends below it: is the lead kept
  once the scaffold's own update stops? GRPO does not read the field, so its runs are ``moved_reading150``'s.

    .venv/bin/python benchmarks/shared_settings.py --setting follow [--setting history2] --seed 0 ... [--oracle --edge]
        [--split test_unseen] [--name NAME]

``reference`` is the learning benchmark's own runs (benchmarks/runs: warm starts and GRPO) and the sweep's
o23 and e22 (benchmarks/sweep/internalization/); the others run into benchmarks/sweep/<setting>/runs with ``edge
bench learning`` (resumable: finished runs are skipped). Every run is evaluated on the same 400 household
test_seen tasks and streams of its seed, so differences are paired by seed and, within a seed, by task.
Writes benchmarks/results/shared_settings[_<name>].{md,json} and the figure shared_settings[_<name>]_experts.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's configurations and where their runs are
import internalization_sweep as sweep  # noqa: E402
from step_probe import carried_states  # noqa: E402  (the steps at which a placing type's object is carried)

from edge.benchmarking.learning import (  # noqa: E402
    LearningBenchConfig,
    evaluation_row,
    paired_difference,
    read_run,
    run_benchmark,
    run_name,
    signed_points,
    task_outcomes,
)
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.split_eval import final_evaluation  # noqa: E402
from edge.benchmarking.stats import t_interval_mean  # noqa: E402
from edge.config import load_params  # noqa: E402
from edge.envs.household.world import kind_of  # noqa: E402
from edge.plots import curves_plot  # noqa: E402
from edge.rollout import Trajectory, read_rollouts  # noqa: E402
from edge.runs import run_status  # noqa: E402

ROOT = Path("benchmarks/sweep")
REFERENCE = "reference"
"""The learning benchmark's settings (params.yaml): its own runs and the sweep's."""
SETTINGS = {
    REFERENCE: [],
    "history2": ["policy.history_steps=2"],
    "history3": ["policy.history_steps=3"],
    "follow": ["bank.block_follows_progress=true"],
    "experts": ["warmup.noisy_expert_episodes=150"],
    "experts300": ["warmup.noisy_expert_episodes=300"],
    "moved": [],
    "moved150": ["warmup.noisy_expert_episodes=150"],
    "reading150": ["warmup.noisy_expert_episodes=150", "warmup.advised_env=household_shuffled"],
    "moved_reading150": ["warmup.noisy_expert_episodes=150", "warmup.advised_env=household_shuffled"],
    "moved_reading150_handoff": ["warmup.noisy_expert_episodes=150", "warmup.advised_env=household_shuffled",
                                 "bank.rho_schedule=handoff", "bank.handoff_round=4"],
}
"""Each setting's overrides of params.yaml, for its warm starts and every run."""
MOVED_ENV = "household_moved"
WARM_STARTS_OF = {"moved": REFERENCE, "moved150": "experts", "moved_reading150": "reading150",
                  "moved_reading150_handoff": "reading150"}
"""The settings whose runs are on ``MOVED_ENV``, and the setting whose warm starts (made in the usual household)
they begin from."""
GRPO_OF = {"moved_reading150_handoff": "moved_reading150"}
"""Settings that change only fields GRPO does not read: their GRPO runs are the named setting's, not made again."""
UPDATES = {sweep.ORACLE: "o23", "edge": "e22"}
"""Each method with experience runs as its best row of the internalization sweep: the oracle control with
o23's update, EDGE with e22's bank. GRPO runs beside the oracle control (it reads none of o23's fields)."""
SPLIT = "test_seen"
"""The split the runs evaluate while training; ``--split`` evaluates their final policies on another too."""
EPISODES = 400
EXPERT_FIELD = "warmup.noisy_expert_episodes"


def expert_episodes(setting: str) -> int | None:
    """The warm start's plain demonstrations by the competent demonstrator, for the settings that change
    nothing else (the reference: params.yaml's); None for a setting that changes something else."""
    if setting == REFERENCE:
        return load_params().warmup.noisy_expert_episodes
    if setting in WARM_STARTS_OF:  # another world: not a point on the axis
        return None
    overrides = SETTINGS[setting]
    if len(overrides) == 1 and overrides[0].startswith(EXPERT_FIELD + "="):
        return int(overrides[0].split("=", 1)[1])
    return None


def env_of(setting: str) -> str:
    """The environment a setting's runs train and evaluate on."""
    return MOVED_ENV if setting in WARM_STARTS_OF else "household"


def bases_of(setting: str) -> Path | None:
    """Where a setting's warm starts are: its own runs folder (None), or, for a world that changed, the
    folder of the setting it takes them from (the reference's are the sweep's)."""
    source = WARM_STARTS_OF.get(setting)
    if source is None:
        return None
    return sweep.BASES if source == REFERENCE else ROOT / source / "runs"


def run_folder(setting: str, method: str, seed: int) -> Path:
    """Where one run is: the reference setting's runs are the benchmark's (GRPO) and the sweep's own."""
    if setting == REFERENCE:
        return sweep.run_folder(UPDATES.get(method, sweep.GRPO), seed, Path("benchmarks/runs"))
    if method == sweep.GRPO:
        setting = GRPO_OF.get(setting, setting)
    return ROOT / setting / "runs" / run_name(env_of(setting), method, seed)


def bench_config(setting: str, methods: list[str], seeds: list[int], jobs: int) -> LearningBenchConfig:
    """The runs of one setting and one update (``UPDATES``): the learning benchmark's settings, household
    test_seen only. GRPO runs with the oracle control's overrides, which it does not read."""
    update = "edge" if "edge" in methods else sweep.ORACLE
    if update == "edge" and len(methods) > 1:
        raise ValueError("EDGE runs with e22's overrides, apart from GRPO and the oracle control")
    suffix = "_edge" if update == "edge" else ""
    return LearningBenchConfig(envs=[env_of(setting)], methods=methods, seeds=seeds, splits=[SPLIT], jobs=jobs,
                               runs_dir=ROOT / setting / "runs", out_dir=ROOT / setting,
                               bases_dir=bases_of(setting),
                               warm_start_env="household" if setting in WARM_STARTS_OF else None,
                               name=f"learning_{setting}{suffix}",
                               extra=[*SETTINGS[setting], *sweep.CONFIGS[UPDATES[update]][1]])


def finished(folder: Path) -> bool:
    return folder.is_dir() and run_status(folder).state == "finished"


def final(run: dict, condition: str, split: str = SPLIT) -> float | None:
    return run["final"].get(f"{split}_{condition}")


def outcomes(run: dict, condition: str, split: str = SPLIT) -> dict | None:
    return run["final_tasks"].get(split, {}).get(condition)


def base(run: dict) -> float:
    return run["curve"][0][f"{SPLIT}_plain"]


def compare(ours: dict[int, dict], theirs: dict[int, dict], condition: str = "plain",
            their_condition: str = "plain", split: str = SPLIT) -> dict:
    """Paired by seed (and by task within a seed) over the seeds both have."""
    seeds = sorted(set(ours) & set(theirs))
    return paired_difference([final(ours[s], condition, split) for s in seeds],
                             [final(theirs[s], their_condition, split) for s in seeds], seeds,
                             [(outcomes(ours[s], condition, split), outcomes(theirs[s], their_condition, split))
                              for s in seeds])


def split_evals(setting: str) -> Path:
    """Where a setting's evaluations on another split are kept; the reference's are the sweep's own
    (split_table.py's), so that its runs are not evaluated twice."""
    return sweep.ROOT / "split-evals" if setting == REFERENCE else ROOT / setting / "split-evals"


def evaluated_on(setting: str, method: str, seed: int, split: str) -> dict:
    """A finished run's final policy on ``split`` (400 tasks, ``edge.benchmarking.split_eval``: its own bank
    settings and final bank, the same tasks and streams for every run of a seed), shaped as ``read_run``'s
    final evaluation so that ``report`` reads both alike."""
    folder = run_folder(setting, method, seed)
    started = time.perf_counter()
    ev = final_evaluation(folder, split, EPISODES, cache_dir=split_evals(setting))
    print(f"{setting} {method} seed {seed} on {split}: plain {ev['plain']['success']:.1%} "
          f"({time.perf_counter() - started:.0f} s)", flush=True)
    return as_final(ev, split)


def as_final(ev: dict, split: str) -> dict:
    """One evaluation on ``split`` (``final_evaluation``'s) shaped as ``read_run``'s final evaluation."""
    return {"final": evaluation_row({split: ev}, [split]), "final_tasks": task_outcomes({split: ev}, [split])}


def moves_after_take(traj: Trajectory) -> list[tuple[int, bool]]:
    """For a placing type's episode: each ``go to`` while the task's object is carried (step_probe's
    ``carried_states``: from the take to the first put), as (steps since the take, 1 for the step right
    after it; whether it heads to the target's kind)."""
    carried = carried_states(traj)
    target = traj.task.spec["goal"]["target"]
    return [(i - carried[0] + 1, kind_of(action[len("go to "):]) == target) for i in carried
            if (action := traj.steps[i].decision.action).startswith("go to ")]


def heading_to_target(folders: list[Path], last_rounds: int = 2) -> dict[str, dict]:
    """The share of moves that head to the target, by steps since the take ("1", "2", "3+"), over the
    training episodes of the runs' last rounds (plain members only): does the policy still know it holds
    the object once the take has left its prompt?"""
    counts: dict[str, list[int]] = {}
    for round_dir in (r for folder in folders for r in sorted(folder.glob("round_[0-9][0-9][0-9]"))[-last_rounds:]):
        for traj in read_rollouts(round_dir / "rollouts.parquet"):
            if traj.conditioned:
                continue
            for since, to_target in moves_after_take(traj):
                tally = counts.setdefault(str(since) if since < 3 else "3+", [0, 0])
                tally[0] += to_target
                tally[1] += 1
    return {k: {"share": hits / moves, "moves": moves} for k, (hits, moves) in sorted(counts.items())}


def report(settings: list[str], seeds: list[int], methods: list[str], split: str = SPLIT) -> dict:
    """Per setting: the warm start's and each method's final success (mean over seeds, Student-t), the
    methods with experience against GRPO, and each method against itself under the reference setting.
    On a split other than the runs' own (``evaluated_on``) there is no warm start or training to read."""
    def load(h: str, m: str, s: int) -> dict:
        return read_run(run_folder(h, m, s), [SPLIT]) if split == SPLIT else evaluated_on(h, m, s, split)

    runs = {h: {m: {s: load(h, m, s) for s in seeds} for m in methods
                if m == sweep.GRPO or all(finished(run_folder(h, m, s)) for s in seeds)} for h in settings}
    out = {}
    for h in settings:
        grpo = runs[h][sweep.GRPO]
        row = {"grpo": t_interval_mean([final(r, "plain", split) for r in grpo.values()]).to_dict()}
        if split == SPLIT:
            row |= {"warm_start": t_interval_mean([base(r) for r in grpo.values()]).to_dict(),
                    "grpo_heading_to_target": heading_to_target([run_folder(h, sweep.GRPO, s) for s in seeds])}
        against_reference = h != REFERENCE and h not in WARM_STARTS_OF  # another world's tasks: not paired
        if against_reference and REFERENCE in runs:
            row["grpo_minus_reference"] = compare(grpo, runs[REFERENCE][sweep.GRPO], split=split)
            if split == SPLIT:
                row["warm_start_minus_reference"] = paired_difference(
                    [base(grpo[s]) for s in seeds], [base(runs[REFERENCE][sweep.GRPO][s]) for s in seeds], seeds)
        for method, key in ((sweep.ORACLE, "oracle"), ("edge", "edge")):
            if method not in runs[h]:  # not asked for, or not finished on every seed: no row
                continue
            ours = runs[h][method]
            for condition in ("plain", "with_bank", "retention"):
                values = [final(r, condition, split) for r in ours.values()]
                row[f"{key}_{condition}"] = t_interval_mean(values).to_dict()
            row[f"{key}_minus_grpo"] = compare(ours, grpo, split=split)
            row[f"{key}_with_bank_minus_grpo"] = compare(ours, grpo, "with_bank", split=split)
            if against_reference and method in runs.get(REFERENCE, {}):
                row[f"{key}_minus_reference"] = compare(ours, runs[REFERENCE][method], split=split)
        out[h] = row
    return out


def pct(e: dict | None) -> str:
    """A mean as a percentage in a table cell; – where there is none."""
    return f"{e['mean']:.1%}" if e else "–"


def diff(e: dict | None) -> str:
    """A paired difference in points with its interval and p-value in a table cell; – where there is none."""
    return f"{signed_points(e)} (p {e['p_value']:.3f})" if e else "–"


def markdown(result: dict) -> str:
    intro, bullets = __doc__.split("\n\n")[1:3]
    moved = [h for h in result["rows"] if h in WARM_STARTS_OF]
    lines = ["# Settings every method shares, which change the warm start too", "", intro.replace("\n", " "), "",
             *("- " + b.replace("\n  ", " ") for b in bullets.removeprefix("- ").split("\n- ")), "",
             f"Seeds {result['seeds']}; household {SPLIT}"
             + (f" ({MOVED_ENV} {SPLIT} for " + ", ".join(moved) + ")" if moved else "")
             + f", 400 tasks a seed; {result['machine']}; "
             f"command: `{result['command']}`.", "",
             "Final success, mean over seeds; differences in points, paired by seed, Student-t 95% interval "
             "and the exact permutation p-value.", "",
             "| setting | warm start | GRPO | GRPO − reference GRPO |", "| --- | --- | --- | --- |"]
    for h, row in result["rows"].items():
        lines.append(f"| {h} | {pct(row['warm_start'])} | {pct(row['grpo'])} "
                     f"| {diff(row.get('grpo_minus_reference'))} |")
    lines += ["", "The methods with experience (oracle: the oracle control with o23's update; EDGE: its own bank "
              "as e22), against GRPO of the same setting and against themselves in the reference.", "",
              "| setting | method | plain | with the advice / bank | retention | plain − GRPO "
              "| with − GRPO's plain | plain − reference |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, name in (("oracle", "oracle (o23)"), ("edge", "EDGE (e22)")):
        for h, row in result["rows"].items():
            if f"{key}_plain" in row:
                lines.append(f"| {h} | {name} | {pct(row[f'{key}_plain'])} | {pct(row[f'{key}_with_bank'])} "
                             f"| {pct(row[f'{key}_retention'])} | {diff(row[f'{key}_minus_grpo'])} "
                             f"| {diff(row[f'{key}_with_bank_minus_grpo'])} "
                             f"| {diff(row.get(f'{key}_minus_reference'))} |")
    lines += ["", "Per seed (points): GRPO − reference GRPO, and each method's plain − GRPO.", "",
              "| setting | GRPO − reference GRPO | oracle plain − GRPO | EDGE plain − GRPO |",
              "| --- | --- | --- | --- |"]
    for h, row in result["rows"].items():
        cells = [" ".join(f"s{s} {100 * d:+.1f}" for s, d in row[k]["per_seed"].items()) if row.get(k) else "–"
                 for k in ("grpo_minus_reference", "oracle_minus_grpo", "edge_minus_grpo")]
        lines.append(f"| {h} | " + " | ".join(cells) + " |")
    lines += ["", "Where GRPO's final policies go while holding the object (pick-and-place and the two-object "
              "type's first object, plain training episodes of the last two rounds, all seeds pooled): the share "
              "of `go to` moves that head to the target, by steps since the take. With one past step in the "
              "prompt (the reference), the take is out of sight from the second step on.", "",
              "| setting | 1st step after the take | 2nd | 3rd and later |", "| --- | --- | --- | --- |"]
    for h, row in result["rows"].items():
        heading = row["grpo_heading_to_target"]
        lines.append(f"| {h} | " + " | ".join(
            f"{heading[k]['share']:.1%} of {heading[k]['moves']}" if k in heading else "–" for k in ("1", "2", "3+"))
            + " |")
    for split, rows in result.get("other_splits", {}).items():
        lines += ["", f"On {split}: every final policy evaluated once more on the first {EPISODES} tasks of the "
                  "split, with its own bank or the advice, the same tasks and streams for every run of a seed "
                  "(paired by seed and task as above).", "",
                  "| setting | GRPO | GRPO − reference GRPO | oracle plain / with | oracle plain − GRPO "
                  "| EDGE plain / with | EDGE plain − GRPO |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for h, row in rows.items():
            cells = [pct(row["grpo"]), diff(row.get("grpo_minus_reference"))]
            for key in ("oracle", "edge"):
                cells += ([f"{pct(row[f'{key}_plain'])} / {pct(row[f'{key}_with_bank'])}",
                           diff(row[f"{key}_minus_grpo"])] if f"{key}_plain" in row else ["–", "–"])
            lines.append(f"| {h} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def expert_figure(result: dict, path: Path) -> Path | None:
    """Final success against the warm start's competent demonstrations (the settings that change only
    those), for GRPO, the warm start and each method with experience, plain and with its advice or bank."""
    axis = sorted((n, h) for h in result["rows"] if (n := expert_episodes(h)) is not None)
    if len(axis) < 2:
        return None
    curves: dict[str, list[tuple[float, float, float | None]]] = {}
    for n, h in axis:
        row = result["rows"][h]
        curves.setdefault("warm start", []).append((n, row["warm_start"]["mean"], None))
        curves.setdefault("GRPO", []).append((n, row["grpo"]["mean"], None))
        for key, name in (("oracle", "oracle control (o23)"), ("edge", "EDGE (e22)")):
            if f"{key}_plain" in row:
                curves.setdefault(name, []).append((n, row[f"{key}_plain"]["mean"], row[f"{key}_with_bank"]["mean"]))
    return curves_plot(curves, path, f"household {SPLIT}, final success, {len(result['seeds'])} seeds",
                       xlabel=f"competent demonstrations in the warm start ({EXPERT_FIELD})",
                       ylabel=f"{SPLIT} success (mean over seeds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setting", action="append", choices=[k for k in SETTINGS if k != REFERENCE],
                        required=True, help="settings to compare with the reference (repeat)")
    parser.add_argument("--seed", type=int, action="append", required=True)
    parser.add_argument("--oracle", action="store_true", help="also the oracle control with o23's update")
    parser.add_argument("--edge", action="store_true", help="also EDGE with e22's bank")
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel, one torch thread each")
    parser.add_argument("--report-only", action="store_true", help="train nothing: tables from finished runs")
    parser.add_argument("--split", action="append", default=[],
                        help=f"also evaluate every final policy on this split ({EPISODES} tasks, kept: evaluated once)")
    parser.add_argument("--name", default="", help="suffix of the output files (keeps the other tables)")
    args = parser.parse_args()
    settings = [REFERENCE, *dict.fromkeys(args.setting)]
    with_grpo = [sweep.GRPO] + ([sweep.ORACLE] if args.oracle else [])
    methods = with_grpo + (["edge"] if args.edge else [])
    if not args.report_only:
        for setting in settings[1:]:
            if setting in GRPO_OF:  # its GRPO runs are another setting's (made there if missing: finished are skipped)
                run_benchmark(bench_config(GRPO_OF[setting], [sweep.GRPO], args.seed, args.jobs), track=False)
            trained = [m for m in with_grpo if not (m == sweep.GRPO and setting in GRPO_OF)]
            if trained:
                run_benchmark(bench_config(setting, trained, args.seed, args.jobs), track=False)
            if args.edge:
                run_benchmark(bench_config(setting, ["edge"], args.seed, args.jobs), track=False)
    command = ("benchmarks/shared_settings.py " + " ".join(f"--setting {h}" for h in settings[1:]) + " "
               + " ".join(f"--seed {s}" for s in args.seed) + (" --oracle" if args.oracle else "")
               + (" --edge" if args.edge else "") + "".join(f" --split {x}" for x in args.split)
               + (f" --name {args.name}" if args.name else ""))
    result = {"seeds": args.seed, "machine": describe_machine(), "command": command,
              "rows": report(settings, args.seed, methods)}
    torch.set_num_threads(1)  # as every benchmark run evaluates, so a cached evaluation is what this one would be
    result["other_splits"] = {split: report(settings, args.seed, methods, split)
                              for split in dict.fromkeys(args.split) if split != SPLIT}
    sweep.OUT.mkdir(parents=True, exist_ok=True)
    stem = "shared_settings" + (f"_{args.name}" if args.name else "")
    (sweep.OUT / f"{stem}.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    (sweep.OUT / f"{stem}.md").write_text(markdown(result))
    expert_figure(result, sweep.OUT / f"{stem}_experts.png")
    print(markdown(result))


if __name__ == "__main__":
    main()
