"""Is the type's step kept? Where a policy heads once it holds the object of a heat, cool or clean task
(issue 14's limit, measured directly).

Sessions 21–22 read off the failure anatomies that the oracle control's plain policy skips the heating
step more often than GRPO's, and that the advice names the tool ("heat the apple with the microwave"):
a policy trained with the block may read the tool from the block instead of from the instruction's
verb. This probe asks the policies that question on the same states. The states: every step of the
`household` training episodes (the last two rounds of GRPO's run and the configuration's run of a seed,
pooled) at which the agent holds the task's object and has not yet transformed it. At each, the policy's
probability of the actions that name the task's tool (`go to microwave 1`, `open microwave 1`, `heat
apple 1 with microwave 1`) against those that name another transform tool (the fridge, the sink basin):

    right-tool share = P(right tool) / (P(right tool) + P(another tool))

for the warm start, GRPO's checkpoints and the configuration's, each plain and with the oracle's advice
in the prompt. Same states for every policy of a seed, so the differences are paired; then pooled over
seeds (Student-t). Reads finished runs and checkpoints only; scores states, plays no episode.

    .venv/bin/python benchmarks/step_probe.py --config o23 --seed 0 ... --seed 4 [--round 3 --round 7]

Writes benchmarks/results/step_probe_<config>[_<name>].{json,md}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from statistics import fmean

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # this folder's scripts, imported below
from advice_probe import base_folder  # noqa: E402  (where a seed's warm start is)
from internalization_sweep import BASES, GRPO, OUT, run_folder  # noqa: E402

from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.stats import t_interval_mean  # noqa: E402
from edge.config import run_params  # noqa: E402
from edge.envs.household.world import TOOL_FOR  # noqa: E402
from edge.guidance import experience_block, true_advice  # noqa: E402
from edge.policy.actor import Actor  # noqa: E402
from edge.policy.model import load_policy  # noqa: E402
from edge.rollout import Trajectory, read_rollouts  # noqa: E402

REFERENCE_RUNS = Path("benchmarks/runs")
"""Where GRPO's runs are (the sweep's default)."""
VERB_OF_TOOL = {tool: verb for verb, tool in TOOL_FOR.items()}
"""The household's transform tools and the verb each one's step uses (microwave: heat, ...)."""


def held_states(traj: Trajectory) -> list[int]:
    """Indices of the steps at which the agent holds the task's object, untransformed: after it took
    the object and before it transformed or put it down. Empty for tasks without a transform tool."""
    goal = traj.task.spec["goal"]
    if goal.get("tool") not in VERB_OF_TOOL:
        return []
    obj, verb = goal["object"], VERB_OF_TOOL[goal["tool"]]
    held, out = False, []
    for i, step in enumerate(traj.steps):
        if held:
            out.append(i)
        words = step.decision.action.split()
        if words[:2] == ["take", obj]:
            held = True
        elif held and (words[:2] == [verb, obj] or words[:2] == ["put", obj]):
            break  # transformed (the step is done) or put down: no longer the decision this probe asks
    return out


def tool_mass(logp: torch.Tensor, admissible: list[str], tool: str) -> tuple[float, float]:
    """P(actions naming ``tool``) and P(actions naming another transform tool) at one state."""
    probs = logp.exp().tolist()
    right = sum(p for p, a in zip(probs, admissible) if tool in a.split())
    wrong = sum(p for p, a in zip(probs, admissible) if any(t in a.split() for t in VERB_OF_TOOL if t != tool))
    return right, wrong


def probe_states(trajectories: list[Trajectory], limit: int, seed: int) -> list[tuple[Trajectory, int]]:
    """The held states of ``trajectories`` where both kinds of tool can be chosen, at most ``limit``
    (a fixed random sample: the same for every policy of the seed)."""
    states = []
    for traj in trajectories:
        tool = traj.task.spec["goal"].get("tool")
        for i in held_states(traj):
            words = {w for a in traj.steps[i].admissible for w in a.split()}
            if tool in words and words & (set(VERB_OF_TOOL) - {tool}):
                states.append((traj, i))
    return random.Random(seed).sample(states, limit) if len(states) > limit else states


def score(actor: Actor, states: list[tuple[Trajectory, int]], advised: bool) -> list[dict]:
    """Per state: its task type, the right-tool probability and share, plain or with the oracle's advice."""
    prompts, candidates = [], []
    for traj, i in states:
        block = experience_block(true_advice(traj.task)) if advised else None
        state = traj.state_at(i, block)
        prompts.append(actor.builder.prompt_ids(state))
        candidates.append([actor.builder.action_ids(a) for a in state.admissible])
    with torch.inference_mode():
        logps = actor.action_logprobs(prompts, candidates)
    out = []
    for (traj, i), logp in zip(states, logps):
        right, wrong = tool_mass(logp, traj.steps[i].admissible, traj.task.spec["goal"]["tool"])
        out.append({"type": traj.task.spec["goal"]["type"], "right": right,
                    "share": right / (right + wrong) if right + wrong > 0 else None})
    return out


def summary(rows: list[dict]) -> dict:
    """Mean right-tool share and probability over states, overall and per task type."""
    def means(part):
        shares = [r["share"] for r in part if r["share"] is not None]
        return {"states": len(part), "share": fmean(shares) if shares else None,
                "right": fmean(r["right"] for r in part)}

    return means(rows) | {"by_type": {t: means([r for r in rows if r["type"] == t])
                                      for t in sorted({r["type"] for r in rows})}}


def probe_seed(config: str, seed: int, rounds: list[int], limit: int) -> dict:
    """Every policy of one seed on the same held states: the warm start, then GRPO's and the
    configuration's checkpoints after ``rounds``, each plain and with the oracle's advice."""
    runs = {name: run_folder(name, seed, REFERENCE_RUNS) for name in (GRPO, config)}
    params = run_params(json.loads((runs[config] / "params.json").read_text()))
    last = params.train.rounds - 1
    trajectories = [t for folder in runs.values() for k in (last - 1, last)
                    for t in read_rollouts(folder / f"round_{k:03d}" / "rollouts.parquet")]
    states = probe_states(trajectories, limit, seed)
    policies = {"warm start": base_folder(runs[config].parent, BASES, "household", seed)}
    for name, folder in runs.items():
        for k in rounds:
            policies[f"{name} r{k}"] = folder / f"round_{k:03d}" / "checkpoint"
    out = {"seed": seed, "states": len(states), "policies": {}}
    for name, checkpoint in policies.items():
        if not checkpoint.is_dir():
            raise FileNotFoundError(f"{checkpoint}: no checkpoint (has the run finished its rounds?)")
        actor = Actor(load_policy(params.policy, checkpoint=checkpoint, seed=seed, envs=["household"]))
        out["policies"][name] = {context: summary(score(actor, states, context == "advice"))
                                 for context in ("plain", "advice")}
        print(f"seed {seed} {name}: plain {out['policies'][name]['plain']['share']:.1%}, "
              f"advice {out['policies'][name]['advice']['share']:.1%} ({len(states)} states)", flush=True)
    return out


def pooled(per_seed: list[dict], config: str, last: int) -> dict:
    """Over seeds: each policy's mean share (Student-t), and the paired differences the question needs."""
    names = list(per_seed[0]["policies"])

    def shares(name, context):
        return [s["policies"][name][context]["share"] for s in per_seed]

    out = {name: {c: t_interval_mean(shares(name, c)).to_dict() for c in ("plain", "advice")} for name in names}
    mine, theirs = f"{config} r{last}", f"{GRPO} r{last}"
    differences = {
        f"{mine} plain − {theirs} plain": (shares(mine, "plain"), shares(theirs, "plain")),
        f"{mine} advice − {mine} plain": (shares(mine, "advice"), shares(mine, "plain")),
        "warm start advice − warm start plain": (shares("warm start", "advice"), shares("warm start", "plain")),
    }
    return {"policies": out, "differences": {k: t_interval_mean([a - b for a, b in zip(*v)]).to_dict()
                                             for k, v in differences.items()}}


def markdown(report: dict) -> str:
    def pct(e):
        return f"{e['mean']:.1%} [{e['low']:.1%}, {e['high']:.1%}]"

    lines = [f"# Is the type's step kept? The right-tool share, {report['config']} against GRPO", "",
             *(part.replace("\n", " ") for part in __doc__.split("\n\n")[1:4]), "",
             f"Seeds {report['seeds']}; {report['machine']}; command: `{report['command']}`.", "",
             "| policy | plain | with the oracle's advice |", "| --- | --- | --- |"]
    lines += [f"| {name} | {pct(p['plain'])} | {pct(p['advice'])} |"
              for name, p in report["pooled"]["policies"].items()]
    lines += ["", "| paired difference (points of share) | mean [95% interval] |", "| --- | --- |"]
    lines += [f"| {k} | {100 * e['mean']:+.1f} [{100 * e['low']:+.1f}, {100 * e['high']:+.1f}] |"
              for k, e in report["pooled"]["differences"].items()]
    types = sorted({t for s in report["per_seed"] for t in s["policies"]["warm start"]["plain"]["by_type"]})
    lines += ["", "By task type (mean over seeds of the share; plain / with the advice):", "",
              "| policy | " + " | ".join(t.split("_")[1] for t in types) + " |", "|---" * (len(types) + 1) + "|"]
    for name in report["pooled"]["policies"]:
        cells = []
        for t in types:
            plain = [s["policies"][name]["plain"]["by_type"].get(t, {}).get("share") for s in report["per_seed"]]
            advice = [s["policies"][name]["advice"]["by_type"].get(t, {}).get("share") for s in report["per_seed"]]
            cells.append(f"{fmean(x for x in plain if x is not None):.0%} / "  # seeds with such states
                         f"{fmean(x for x in advice if x is not None):.0%}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the sweep's configuration (an oracle control, o…)")
    parser.add_argument("--seed", type=int, action="append", required=True)
    parser.add_argument("--round", type=int, action="append", help="checkpoints to probe (default 3 and the last)")
    parser.add_argument("--states", type=int, default=400, help="held states per seed, at most (a fixed sample)")
    parser.add_argument("--name", default="", help="suffix of the output files")
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = run_folder(args.config, args.seed[0], REFERENCE_RUNS)
    last = run_params(json.loads((folder / "params.json").read_text())).train.rounds - 1
    rounds = sorted(set(args.round or [3, last]))
    per_seed = [probe_seed(args.config, s, rounds, args.states) for s in args.seed]
    report = {"config": args.config, "seeds": args.seed, "rounds": rounds, "machine": describe_machine(),
              "command": "benchmarks/step_probe.py " + " ".join(
                  [f"--config {args.config}", *(f"--seed {s}" for s in args.seed), *(f"--round {k}" for k in rounds)]),
              "per_seed": per_seed, "pooled": pooled(per_seed, args.config, max(rounds))}
    stem = OUT / f"step_probe_{args.config}{'_' + args.name if args.name else ''}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
