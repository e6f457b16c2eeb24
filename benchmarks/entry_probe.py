"""Which of a learned bank's entries are worth following (issue 16): each entry's paired effect.

For the EDGE run of each seed (a folder `edge bench learning` or `benchmarks/internalization_sweep.py`
wrote), its final bank is probed entry by entry (`edge.benchmarking.entry_probe.entry_effects`) on the policies that
would read it: the run's warm start and its final checkpoint. Every evaluation task that retrieves
anything is played plain, with its block, and with the block less each entry, on the same streams; an
entry's contribution is what leaving it out costs, its lift what the whole block adds where it is shown,
its oracle words the share of its words the oracle's advice for the task also says. Entries are grouped
by the environment's episode stage (household: where to find the object, how to transform it, the second
object, generic advice), so the table says which kind of guidance earns or costs the bank's worth. Last,
per policy, the retrieving tasks are played with the block shown only where it is complete (an entry for
every stage of the oracle's advice for the task; else plain), beside the block as retrieved.

    .venv/bin/python benchmarks/entry_probe.py --edge-runs benchmarks/sweep/internalization/e7 \
        --seed 0 --seed 1 --tasks 200 --sample-seed 7 --sample-seed 8

Writes benchmarks/results/entry_probe_<env>[_<name>].{json,md}. One sampling seed per task is a coin
flip per episode: an entry shown on 20 tasks has a contribution good to about +-0.2; read the stage
totals, which pool hundreds of episodes, before single entries.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from advice_probe import base_folder  # this folder's advice probe: where a seed's warm start is

from edge.benchmarking.entry_probe import entry_effects, entry_labels, retrieved_entries
from edge.benchmarking.machine import describe_machine
from edge.envs.registry import knowledge
from edge.evaluate import evaluate
from edge.guidance import has_oracle, true_advice
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.rollout import Experience
from edge.runs import read_run_params
from edge.train import Run

STAGES = {0: "find the object", 1: "transform / lamp", 2: "second object", 3: "generic"}


def probe_run(edge_run: Path, bases: Path, env: str, seed: int, n_tasks: int, split: str,
              sample_seeds: list[int]) -> dict:
    """Per policy (warm start, final), every retrieved entry's effect; per stage, the pooled totals."""
    params = read_run_params(edge_run)
    run = Run(params, edge_run)  # read where it is now (Run.open would compare the folder it was made in)
    last = params.train.rounds - 1
    checkpoint = edge_run / f"round_{last:03d}" / "checkpoint"
    if not checkpoint.is_dir():
        raise FileNotFoundError(f"{checkpoint}: the run has not finished its last round")
    tasks = run.eval_tasks(split)[:n_tasks]
    retrieve = retrieved_entries(run.bank(), params.bank)
    found = {t.task_id: retrieve(t) for t in tasks}  # once per task, for both policies

    def retrieved(task):
        return found[task.task_id]

    oracle = true_advice if has_oracle(env) else None
    stage = knowledge(env).guidance_stage if knowledge(env).has("guidance_stage") else None
    out = {"run": str(edge_run), "seed": seed, "tasks": len(tasks),
           "retrieving_tasks": sum(retrieved(t) is not None for t in tasks), "policies": {}}
    for name, folder in (("warm start", base_folder(edge_run.parent, bases, env, seed)), ("EDGE final", checkpoint)):
        actor = Actor(load_policy(params.policy, checkpoint=folder, seed=seed, envs=[env]))
        effects = entry_effects(actor, tasks, sample_seeds, retrieved, oracle, entry_labels(run.bank(), params.bank))
        rows = [e.as_dict() | {"stage": STAGES.get(stage(e.text), str(stage(e.text))) if stage else "-"}
                for e in effects]
        out["policies"][name] = {"entries": rows, "stages": pooled(rows)}
        if stage and oracle:
            out["policies"][name]["complete_blocks"] = complete_blocks(actor, tasks, sample_seeds, retrieved, stage)
    return out


def complete_blocks(actor: Actor, tasks: list, sample_seeds: list[int], retrieved, stage) -> dict:
    """Success on the retrieving tasks plain, with the retrieved block, and with the block shown only where
    it is complete (it has an entry for every stage the oracle's advice for the task has; else plain)."""
    shown = {t.task_id: found for t in tasks if (found := retrieved(t)) is not None}
    probed = [t for t in tasks if t.task_id in shown]

    def complete(t) -> bool:
        return {stage(line) for line in true_advice(t)} <= {stage(text) for text in shown[t.task_id][1]}

    def block(t):
        return Experience(" ".join(shown[t.task_id][1]))

    result = {"tasks": len(probed), "complete": sum(complete(t) for t in probed), "plain": 0.0, "block": 0.0,
              "complete_only": 0.0}
    for seed in sample_seeds:
        result["plain"] += evaluate(actor, probed, seed).success / len(sample_seeds)
        result["block"] += evaluate(actor, probed, seed, experience_for=block).success / len(sample_seeds)
        result["complete_only"] += evaluate(actor, probed, seed, experience_for=lambda t: block(t) if complete(t)
                                            else None).success / len(sample_seeds)
    return result


def pooled(rows: list[dict]) -> dict:
    """Per stage: entries, episodes, and contribution / lift / oracle words pooled over the episodes."""
    by_stage: dict[str, dict] = {}
    for r in rows:
        s = by_stage.setdefault(r["stage"], {"entries": 0, "episodes": 0, "contribution": 0.0, "lift": 0.0,
                                             "oracle_words": 0.0, "helping": 0, "hurting": 0})
        s["entries"] += 1
        s["episodes"] += r["episodes"]
        s["contribution"] += r["contribution"] * r["episodes"]
        s["lift"] += r["lift"] * r["episodes"]
        s["oracle_words"] += (r["oracle_words"] or 0.0) * r["episodes"]
        s["helping"] += r["contribution"] > 0
        s["hurting"] += r["contribution"] < 0
    for s in by_stage.values():
        for key in ("contribution", "lift", "oracle_words"):
            s[key] /= max(s["episodes"], 1)
    return by_stage


def markdown(results: list[dict], args: argparse.Namespace) -> str:
    lines = [f"# Per-entry probe: {args.env} {args.split}, runs in `{args.edge_runs}`", "",
             "Each learned entry's paired effect on the policies that read it (`benchmarks/entry_probe.py`): "
             "contribution = success with the block − with the block less the entry; lift = with the block − "
             "plain, on the tasks it is shown on; oracle words = share of its words the oracle's advice for "
             "the task also says. Points are percentage points; episodes = tasks × sampling seeds "
             f"({args.sample_seed}).", "", f"Machine: {describe_machine()}.", "",
             "## By stage, pooled over seeds", "",
             "| policy | stage | entries | episodes | contribution | lift | oracle words | helping / hurting entries |",
             "|---|---|---|---|---|---|---|---|"]
    for policy in ("warm start", "EDGE final"):
        stages: dict[str, dict] = {}
        for res in results:
            for name, s in res["policies"][policy]["stages"].items():
                t = stages.setdefault(name, {"entries": 0, "episodes": 0, "contribution": 0.0, "lift": 0.0,
                                             "oracle_words": 0.0, "helping": 0, "hurting": 0})
                for key in ("entries", "episodes", "helping", "hurting"):
                    t[key] += s[key]
                for key in ("contribution", "lift", "oracle_words"):
                    t[key] += s[key] * s["episodes"]
        for name, t in sorted(stages.items()):
            n = max(t["episodes"], 1)
            lines.append(f"| {policy} | {name} | {t['entries']} | {t['episodes']} "
                         f"| {100 * t['contribution'] / n:+.1f} | {100 * t['lift'] / n:+.1f} "
                         f"| {t['oracle_words'] / n:.2f} | {t['helping']} / {t['hurting']} |")
    if all("complete_blocks" in res["policies"]["EDGE final"] for res in results):
        lines += ["", "## Complete blocks only, by seed", "",
                  "On the retrieving tasks: plain, with the block retrieval gives, and with the block shown only "
                  "where it has an entry for every stage of the oracle's advice for the task (else plain).", "",
                  "| seed | policy | retrieving tasks | complete blocks | plain | block | complete blocks only |",
                  "|---|---|---|---|---|---|---|"]
        for res in results:
            for policy in ("warm start", "EDGE final"):
                c = res["policies"][policy]["complete_blocks"]
                lines.append(f"| {res['seed']} | {policy} | {c['tasks']} | {c['complete']} | {c['plain']:.1%} "
                             f"| {c['block']:.1%} | {c['complete_only']:.1%} |")
    lines += ["", "## Every entry, by seed (EDGE final)", ""]
    for res in results:
        lines += [f"### seed {res['seed']}: {res['retrieving_tasks']} of {res['tasks']} tasks retrieve", "",
                  "| entry | stage | text | episodes | contribution | lift | oracle words "
                  "| contribution to the warm start |",
                  "|---|---|---|---|---|---|---|---|"]
        warm = {r["entry_id"]: r for r in res["policies"]["warm start"]["entries"]}
        for r in res["policies"]["EDGE final"]["entries"]:
            w = warm.get(r["entry_id"])
            words = "-" if r["oracle_words"] is None else f"{r['oracle_words']:.2f}"
            to_warm = f"{100 * w['contribution']:+.1f}" if w else "-"
            lines.append(f"| {r['entry_id']} | {r['stage']} | {r['text'].replace('|', '/')} | {r['episodes']} "
                         f"| {100 * r['contribution']:+.1f} | {100 * r['lift']:+.1f} | {words} | {to_warm} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edge-runs", type=Path, default=Path("benchmarks/runs"),
                        help="folder holding <env>-edge-s<seed> run folders")
    parser.add_argument("--bases", type=Path, default=Path("benchmarks/sweep/bases"))
    parser.add_argument("--env", default="household")
    parser.add_argument("--seed", type=int, action="append", help="benchmark seeds (repeat; default 0)")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--split", default="test_seen")
    parser.add_argument("--sample-seed", type=int, action="append", help="sampling seeds (repeat; default 7)")
    parser.add_argument("--name", default=None, help="results file suffix (default none)")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    args.seed, args.sample_seed = args.seed or [0], args.sample_seed or [7]
    torch.set_num_threads(1)  # as the benchmark's runs
    results = []
    for seed in args.seed:
        res = probe_run(args.edge_runs / f"{args.env}-edge-s{seed}", args.bases, args.env, seed, args.tasks,
                        args.split, args.sample_seed)
        results.append(res)
        print(f"seed {seed}: {res['retrieving_tasks']} of {res['tasks']} tasks retrieve; by stage (EDGE final): "
              + ", ".join(f"{k} {100 * v['contribution']:+.1f}" for k, v in
                          res["policies"]["EDGE final"]["stages"].items()), flush=True)
    stem = f"entry_probe_{args.env}" + (f"_{args.name}" if args.name else "")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{stem}.json").write_text(json.dumps(
        {"args": {k: str(v) for k, v in vars(args).items()}, "machine": describe_machine(), "results": results},
        indent=2) + "\n")
    (args.out_dir / f"{stem}.md").write_text(markdown(results, args))
    print(f"written {args.out_dir / stem}.{{json,md}}")


if __name__ == "__main__":
    main()
