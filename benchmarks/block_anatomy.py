"""Why a learned bank's block lifts a policy less than the oracle's advice (issue 16): blocks made of
the two, stage by stage (`edge.benchmarking.block_anatomy`).

For each seed: the EDGE run's final bank (``--edge-runs``, e.g. a sweep configuration's folder), and the
policies that would read it: the seed's warm start, GRPO's final checkpoint (``--runs``) and the EDGE run's
own. On the evaluation tasks that retrieve anything, every policy plays the same episodes (same task,
same sampling stream) plain, with the oracle's advice, with the bank's block, with the bank's block
completed by the oracle's entries for the stages it lacks, and with the oracle's block in which one stage
(finding the object; the later steps) is the bank's. Differences are paired task by task:

- oracle − bank: the whole shortfall;
- completed − bank: what the steps the bank did not retrieve cost;
- oracle − (oracle, the bank's find entries): what the bank's place lists cost;
- oracle − (oracle, the bank's later steps): what the bank's wording of the later steps costs.

    .venv/bin/python benchmarks/block_anatomy.py --edge-runs benchmarks/sweep/internalization/e16 \
        --seed 0 --seed 1 --seed 2 --seed 3 --seed 4 --tasks 200

Writes benchmarks/results/block_anatomy_<env>_<name>.{json,md} (and one json per seed, read back on a
rerun). One sampling seed: on ~180 tasks a
success rate carries about +-3.5 points of noise per seed; the mean over seeds pools them.

``--coverage-only`` plays nothing: per seed, how many of the final bank's blocks lack a stage and why (an
entry retrieval turned away, entries pruned and by which rule, or none ever written), in
benchmarks/results/block_coverage_<env>_<name>.{json,md}; seconds a seed.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import torch
from advice_probe import base_folder  # this folder's advice probe: where a seed's warm start is

from edge.benchmarking.block_anatomy import completed, oracle_with_bank_stage, stage_coverage
from edge.benchmarking.entry_probe import retrieved_entries
from edge.benchmarking.machine import describe_machine
from edge.benchmarking.stats import t_interval_mean
from edge.envs.registry import knowledge
from edge.evaluate import evaluate
from edge.guidance import experience_block, true_advice
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.rollout import Experience
from edge.runs import read_run_params
from edge.train import Run

CONDITIONS = ("plain", "oracle", "bank", "completed", "oracle_bank_find", "oracle_bank_steps")
GAPS = {  # name: (minuend, subtrahend, what it measures)
    "oracle - bank": ("oracle", "bank", "the whole shortfall"),
    "completed - bank": ("completed", "bank", "the steps the bank did not retrieve"),
    "oracle - oracle_bank_find": ("oracle", "oracle_bank_find", "the bank's place lists (its find entries)"),
    "oracle - oracle_bank_steps": ("oracle", "oracle_bank_steps", "the bank's wording of the later steps"),
    "bank - plain": ("bank", "plain", "the bank's lift"),
    "oracle - plain": ("oracle", "plain", "the oracle's lift"),
}


def anatomy(runs: Path, edge_runs: Path, bases: Path, env: str, seed: int, n_tasks: int, split: str,
            sample_seed: int) -> dict:
    edge_run = edge_runs / f"{env}-edge-s{seed}"
    params = read_run_params(edge_run)
    run = Run(params, edge_run)  # read where it is now (Run.open would compare the folder it was made in)
    last = params.train.rounds - 1
    stage = knowledge(env).guidance_stage
    tasks = run.eval_tasks(split)[:n_tasks]
    # (entry ids, their prompt texts in the block's order) as training and evaluation retrieve them.
    retrieve = retrieved_entries(run.bank(), params.bank)
    found = {t.task_id: retrieve(t) for t in tasks}
    probed = [t for t in tasks if found[t.task_id] is not None]
    bank = {t.task_id: found[t.task_id][1] for t in probed}
    later = {stage(a) for t in probed for a in true_advice(t)} - {0}
    blocks = {
        "plain": lambda t: None,
        "oracle": lambda t: Experience(experience_block(true_advice(t))),
        "bank": lambda t: Experience(experience_block(bank[t.task_id]), found[t.task_id][0]),
        "completed": lambda t: Experience(completed(bank[t.task_id], true_advice(t), stage)),
        "oracle_bank_find": lambda t: Experience(oracle_with_bank_stage(bank[t.task_id], true_advice(t), stage, {0})),
        "oracle_bank_steps": lambda t: Experience(oracle_with_bank_stage(bank[t.task_id], true_advice(t), stage,
                                                                         later)),
    }
    policies = {"warm start": base_folder(edge_runs, bases, env, seed),
                "GRPO final": runs / f"{env}-grpo-s{seed}" / f"round_{last:03d}" / "checkpoint",
                "EDGE final": edge_run / f"round_{last:03d}" / "checkpoint"}
    out = {"seed": seed, "edge_run": str(edge_run), "asked_tasks": n_tasks, "split": split,
           "sample_seed": sample_seed, "tasks": len(tasks), "retrieving_tasks": len(probed),
           "policies": {}}
    if not probed:  # nothing to compare on: the seed is reported, and left out of the means
        print(f"seed {seed}: no evaluation task retrieves anything", flush=True)
        return out
    for name, folder in policies.items():
        actor = Actor(load_policy(params.policy, checkpoint=folder, seed=seed, envs=[env]))
        out["policies"][name] = {c: evaluate(actor, probed, sample_seed, experience_for=blocks[c]).success
                                 for c in CONDITIONS}
        print(f"seed {seed} {name}: " + ", ".join(f"{c} {v:.1%}" for c, v in out["policies"][name].items()),
              flush=True)
    return out


def coverage(edge_runs: Path, env: str, seed: int, n_tasks: int, split: str) -> dict:
    """Retrieval only (no policy): how many retrieving blocks lack a stage, and why."""
    edge_run = edge_runs / f"{env}-edge-s{seed}"
    params = read_run_params(edge_run)
    run = Run(params, edge_run)
    return stage_coverage(run.bank(), run.eval_tasks(split)[:n_tasks], params.bank, knowledge(env))


def pruned_because(coverages: list[dict]) -> str:
    """The pruning rules behind the missing stages of ``coverages``, summed, most first ("internalized 64, ...")."""
    rules: Counter = Counter()
    for c in coverages:
        rules.update(c["pruned_because"])
    return ", ".join(f"{rule} {n}" for rule, n in rules.most_common())


def coverage_sentence(coverages: list[dict]) -> str:
    """What ``stage_coverage`` found, summed over seeds, in one sentence."""
    total = {k: sum(c[k] for c in coverages) for k in ("retrieving", "lacking_a_stage", "left_out")}
    causes = {k: sum(c["missing_stages"][k] for c in coverages) for k in ("refused", "pruned", "never_written")}
    because = pruned_because(coverages)
    return (f"Blocks lacking a stage the task's type takes (of the retrieving tasks, summed over seeds): "
            f"{total['lacking_a_stage']} of {total['retrieving']}; in {total['left_out']} the bank had an entry for "
            f"every stage (the block as retrieved left one out). Of the other blocks' missing stages, "
            f"{causes['refused']} had an active entry that retrieval turned away (its key below the similarity "
            f"threshold), {causes['pruned']} only entries pruned" + (f" ({because})" if because else "")
            + f", and {causes['never_written']} none ever written.")


def coverage_markdown(coverages: dict[int, dict], args: argparse.Namespace) -> str:
    """``--coverage-only``: per seed, what the final bank's blocks lack and why (no episodes played)."""
    lines = [f"# Block coverage: {args.env} {args.split}, the final banks of `{args.edge_runs}`", "",
             f"`benchmarks/block_anatomy.py --coverage-only` on the first {args.tasks} tasks: retrieval alone, "
             "no episodes (see `edge.benchmarking.block_anatomy.stage_coverage`).", "",
             coverage_sentence(list(coverages.values())), "",
             "| seed | retrieving | lacking a stage | left out | refused | pruned | never written | pruned because |",
             "|---|---|---|---|---|---|---|---|"]
    for seed, c in coverages.items():
        m = c["missing_stages"]
        because = pruned_because([c]) or "–"
        lines.append(f"| {seed} | {c['retrieving']} | {c['lacking_a_stage']} | {c['left_out']} | {m['refused']} "
                     f"| {m['pruned']} | {m['never_written']} | {because} |")
    return "\n".join(lines) + "\n"


def summary(results: list[dict]) -> dict:
    """Per policy and gap: the mean over seeds with its Student-t interval, and per seed (seeds whose bank
    retrieved for no task are left out)."""
    results = [r for r in results if r["policies"]]
    out = {}
    for policy in (results[0]["policies"] if results else {}):
        out[policy] = {}
        for gap, (a, b, _) in GAPS.items():
            diffs = [r["policies"][policy][a] - r["policies"][policy][b] for r in results]
            out[policy][gap] = t_interval_mean(diffs).to_dict() | {"per_seed": diffs}
    return out


def markdown(results: list[dict], table: dict, args: argparse.Namespace) -> str:
    seeds = [r["seed"] for r in results]
    lines = [f"# Block anatomy: {args.env} {args.split}, the final banks of `{args.edge_runs}`", "",
             "Where the learned block falls short of the oracle's advice (`benchmarks/block_anatomy.py`; see its "
             "docstring): on the evaluation tasks that retrieve anything (of the first "
             f"{args.tasks}), each policy plays the same episodes with blocks made of the bank's entries and "
             "the oracle's, stage by stage. Points: mean over seeds "
             f"{', '.join(map(str, seeds))} with the 95% Student-t interval, then per seed.", "",
             f"Machine: {describe_machine()}.", "",
             "Retrieving tasks per seed: " + ", ".join(f"s{r['seed']} {r['retrieving_tasks']}" for r in results)
             + ".", "",
             coverage_sentence([r["coverage"] for r in results]),
             "", "## Success on the retrieving tasks (mean over seeds)", "",
             "| policy | " + " | ".join(CONDITIONS) + " |", "|---|" + "---|" * len(CONDITIONS)]
    probed = [r for r in results if r["policies"]]
    for policy in table:
        means = [sum(r["policies"][policy][c] for r in probed) / len(probed) for c in CONDITIONS]
        lines.append(f"| {policy} | " + " | ".join(f"{m:.1%}" for m in means) + " |")
    lines += ["", "## The gaps (points)", "", "| policy | gap | what it measures | mean [95% CI] | per seed |",
              "|---|---|---|---|---|"]
    for policy, gaps in table.items():
        for gap, e in gaps.items():
            per_seed = ", ".join(f"{100 * d:+.1f}" for d in e["per_seed"])
            lines.append(f"| {policy} | {gap} | {GAPS[gap][2]} | {100 * e['mean']:+.1f} "
                         f"[{100 * e['low']:+.1f}, {100 * e['high']:+.1f}] | {per_seed} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("benchmarks/runs"), help="where GRPO's runs are")
    parser.add_argument("--edge-runs", type=Path, required=True, help="where the EDGE runs are")
    parser.add_argument("--bases", type=Path, default=Path("benchmarks/sweep/bases"))
    parser.add_argument("--env", default="household")
    parser.add_argument("--seed", type=int, action="append", help="seeds (repeat; default 0)")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--split", default="test_seen")
    parser.add_argument("--sample-seed", type=int, default=7)
    parser.add_argument("--name", default=None, help="results file suffix (default: the --edge-runs folder's name)")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--coverage-only", action="store_true",
                        help="only what the final banks' blocks lack and why (retrieval, no episodes): "
                             "writes block_coverage_<env>_<name>.{json,md}")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the benchmark's runs
    stem = f"block_anatomy_{args.env}_{args.name or args.edge_runs.name}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.coverage_only:
        coverages = {seed: coverage(args.edge_runs, args.env, seed, args.tasks, args.split)
                     for seed in args.seed or [0]}
        stem = stem.replace("block_anatomy_", "block_coverage_", 1)
        (args.out_dir / f"{stem}.json").write_text(json.dumps(
            {"args": {k: str(v) for k, v in vars(args).items()}, "by_seed": coverages}, indent=2) + "\n")
        report = coverage_markdown(coverages, args)
        (args.out_dir / f"{stem}.md").write_text(report)
        print(report)
        return
    results = []
    for seed in args.seed or [0]:
        part = args.out_dir / f"{stem}_s{seed}.json"
        if part.exists():  # resumable: a finished seed is read back, if it probed the same thing
            done = json.loads(part.read_text())
            asked = {"edge_run": str(args.edge_runs / f"{args.env}-edge-s{seed}"), "asked_tasks": args.tasks,
                     "split": args.split, "sample_seed": args.sample_seed}
            if any(done.get(k) != v for k, v in asked.items()):
                raise SystemExit(f"{part} probed {', '.join(f'{k}={done.get(k)}' for k in asked)}, not "
                                 f"{', '.join(f'{k}={v}' for k, v in asked.items())}: remove it or pass --name")
            results.append(done)
            continue
        results.append(anatomy(args.runs, args.edge_runs, args.bases, args.env, seed, args.tasks, args.split,
                               args.sample_seed))
        part.write_text(json.dumps(results[-1], indent=2) + "\n")
    for r in results:  # cheap, so added to (or brought up to date in) seeds probed before it was recorded
        if "missing_stages" not in r.get("coverage", {}):
            r["coverage"] = coverage(args.edge_runs, args.env, r["seed"], args.tasks, args.split)
            (args.out_dir / f"{stem}_s{r['seed']}.json").write_text(json.dumps(r, indent=2) + "\n")
    table = summary(results)
    (args.out_dir / f"{stem}.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                           "summary": table, "by_seed": results}, indent=2) + "\n")
    (args.out_dir / f"{stem}.md").write_text(markdown(results, table, args))
    print(markdown(results, table, args))


if __name__ == "__main__":
    main()
