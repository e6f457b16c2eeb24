"""Which steps are kept? Where a policy heads at one stage of a household task, plain and with the
oracle's advice (issue 14's limit, measured directly).

Five stages, each a question about one decision on recorded states:

- ``tool`` (the type's step): where the agent holds a heat, cool or clean task's object and has not
  transformed it, the probability of the actions that name the task's tool (`go to microwave 1`, `open
  microwave 1`, `heat apple 1 with microwave 1`) against those that name another transform tool (the
  fridge, the sink basin). Sessions 21-22 read off failure anatomies that a policy trained with the block
  may read the tool from the block ("heat the apple with the microwave") instead of the instruction's verb.
- ``step`` (the type's step or straight to the target): on the same states as ``tool``, the actions that
  name the task's tool against those that name the target receptacle (`go to countertop 1`, `put apple 1
  in/on countertop 1`): does the policy do the step or skip it (the failure reader's "no transform")?
- ``after`` (once transformed): from the task's transformation until the object is put down, the actions
  that name the target against those that name another transform tool (cooling the heated apple undoes
  the step).
- ``find`` (where the object lies): before the agent first takes the task's object, while it is not in
  sight, the probability of going to a receptacle it has not visited whose kind usually holds that object
  (the advice's first line: "apples are usually in the fridge or the countertop") against going to
  another unvisited receptacle. Where an object kind lies is what a plain policy must learn by heart.
- ``place`` (taking the object to the target): in pick-and-place and the two-object type, from taking
  the task's object until putting it down, the actions that name the target against those that name a
  receptacle kind where the object usually lies (the places the advice names). The advice is about
  finding the object; does it pull an agent that already holds it back to those places?

The states: every step of the `household` training episodes (the last two rounds of GRPO's run and the
configuration's run of a seed, pooled) that asks the stage's question with both kinds of action
admissible. At each, for the warm start, GRPO's checkpoints and the configuration's, each plain and with
the oracle's advice in the prompt:

    share = P(right actions) / (P(right actions) + P(other actions))

Same states for every policy of a seed, so the differences are paired; then pooled over seeds
(Student-t). "chance" is the share of a policy uniform over those actions. Reads finished runs and
checkpoints only; scores states, plays no episode.

    .venv/bin/python benchmarks/step_probe.py --config o23 --seed 0 ... --seed 4 [--stage step] [--round 3 --round 7]

Writes benchmarks/results/step_probe_<config>[_<stage>][_<name>].{json,md} (no stage in the name for ``tool``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # this folder's scripts, imported below
from advice_probe import base_folder  # noqa: E402  (where a seed's warm start is)
from internalization_sweep import BASES, GRPO, OUT, run_folder  # noqa: E402

from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.benchmarking.stats import t_interval_mean  # noqa: E402
from edge.envs.household.world import OBJECT_KINDS, TOOL_FOR, kind_of  # noqa: E402
from edge.guidance import experience_block, true_advice  # noqa: E402
from edge.policy.actor import Actor  # noqa: E402
from edge.policy.model import load_policy  # noqa: E402
from edge.rollout import Trajectory, read_rollouts  # noqa: E402
from edge.runs import read_run_params  # noqa: E402

REFERENCE_RUNS = Path("benchmarks/runs")
"""Where GRPO's runs are (the sweep's default)."""
SHORT_TYPE = {"look_at_obj_in_light": "look", "pick_and_place_simple": "place",
              "pick_clean_then_place_in_recep": "clean", "pick_cool_then_place_in_recep": "cool",
              "pick_heat_then_place_in_recep": "heat", "pick_two_obj_and_place": "two"}
"""The household's task types, as the by-type table heads them."""
VERB_OF_TOOL = {tool: verb for verb, tool in TOOL_FOR.items()}
"""The household's transform tools and the verb each one's step uses (microwave: heat, ...)."""


def steps_between(traj: Trajectory, begins: list[list[str]], ends: list[list[str]]) -> list[int]:
    """Indices of the steps after the first action that begins with one of ``begins`` (its first two
    words), up to and including the first later one that begins with one of ``ends``."""
    started, out = False, []
    for i, step in enumerate(traj.steps):
        words = step.decision.action.split()[:2]
        if started:
            out.append(i)
            if words in ends:
                break
        elif words in begins:
            started = True
    return out


def object_and_verb(traj: Trajectory) -> tuple[str, str] | None:
    """The task's object and the verb of its transformation (apple, heat); None without a transform tool."""
    goal = traj.task.spec["goal"]
    return (goal["object"], VERB_OF_TOOL[goal["tool"]]) if goal.get("tool") in VERB_OF_TOOL else None


def naming(admissible: list[str], words: set[str]) -> list[str]:
    """The admissible actions that name one of ``words`` (a receptacle kind: `go to fridge 1` names fridge)."""
    return [a for a in admissible if words & set(a.split())]


def held_states(traj: Trajectory) -> list[int]:
    """Indices of the steps at which the agent holds the task's object, untransformed: after it took
    the object, up to the step that transforms it or puts it down (where the step is done or skipped).
    Empty for tasks without a transform tool."""
    if (transform := object_and_verb(traj)) is None:
        return []
    obj, verb = transform
    return steps_between(traj, [["take", obj]], [[verb, obj], ["put", obj]])


def tool_sides(traj: Trajectory, i: int) -> tuple[list[str], list[str]]:
    """At step ``i``: the admissible actions that name the task's tool, and those that name another
    transform tool."""
    tool, admissible = traj.task.spec["goal"]["tool"], traj.steps[i].admissible
    return naming(admissible, {tool}), naming(admissible, set(VERB_OF_TOOL) - {tool})


def transformed_states(traj: Trajectory) -> list[int]:
    """Indices of the steps after the agent transformed the task's object with its verb (heat, cool,
    clean), up to the step that puts it down. Empty for tasks without a transform tool."""
    if (transform := object_and_verb(traj)) is None:
        return []
    obj, verb = transform
    return steps_between(traj, [[verb, obj]], [["put", obj]])


def step_sides(traj: Trajectory, i: int) -> tuple[list[str], list[str]]:
    """At step ``i``: the actions that name the task's tool, and those that name the target receptacle
    (and not the tool)."""
    goal, admissible = traj.task.spec["goal"], traj.steps[i].admissible
    right = naming(admissible, {goal["tool"]})
    return right, [a for a in naming(admissible, {goal["target"]}) if a not in right]


def after_sides(traj: Trajectory, i: int) -> tuple[list[str], list[str]]:
    """At step ``i``: the actions that name the target receptacle, and those that name a transform tool
    other than the task's and the target."""
    goal, admissible = traj.task.spec["goal"], traj.steps[i].admissible
    right = naming(admissible, {goal["target"]})
    others = set(VERB_OF_TOOL) - {goal["tool"], goal["target"]}
    return right, [a for a in naming(admissible, others) if a not in right]


def search_states(traj: Trajectory) -> list[int]:
    """Indices of the steps before the agent first takes the task's object at which no action takes it
    (it is not in sight): the agent is still looking for it."""
    obj, out = traj.task.spec["goal"]["object"], []
    for i, step in enumerate(traj.steps):
        if step.decision.action.split()[:2] == ["take", obj]:
            break
        if not any(a.split()[:2] == ["take", obj] for a in step.admissible):
            out.append(i)
    return out


def search_sides(traj: Trajectory, i: int) -> tuple[list[str], list[str]]:
    """At step ``i``: going to a receptacle not visited yet whose kind usually holds the task's object
    (its kind's likely receptacle kinds), and going to another receptacle not visited yet."""
    likely = set(OBJECT_KINDS[traj.task.spec["goal"]["object"]].likely)
    visited = {s.decision.action[len("go to "):] for s in traj.steps[:i] if s.decision.action.startswith("go to ")}
    unvisited = [a for a in traj.steps[i].admissible if a.startswith("go to ") and a[len("go to "):] not in visited]
    right = [a for a in unvisited if kind_of(a[len("go to "):]) in likely]
    return right, [a for a in unvisited if a not in right]


PLACING_TYPES = ("pick_and_place_simple", "pick_two_obj_and_place")
"""The types whose object goes from where it was taken straight to the target."""


def carried_states(traj: Trajectory) -> list[int]:
    """Indices of the steps after a placing type's agent took the task's object, up to the step that puts
    it down. Empty for the other types."""
    goal = traj.task.spec["goal"]
    if goal["type"] not in PLACING_TYPES:
        return []
    return steps_between(traj, [["take", goal["object"]]], [["put", goal["object"]]])


def place_sides(traj: Trajectory, i: int) -> tuple[list[str], list[str]]:
    """At step ``i``: the actions that name the target receptacle, and those that name a kind where the
    task's object usually lies (not the target)."""
    goal, admissible = traj.task.spec["goal"], traj.steps[i].admissible
    right = naming(admissible, {goal["target"]})
    usual = set(OBJECT_KINDS[goal["object"]].likely) - {goal["target"]}
    return right, [a for a in naming(admissible, usual) if a not in right]


@dataclass(frozen=True)
class Stage:
    """One question the probe asks: at which steps of an episode, and which actions answer it right."""

    title: str
    states: Callable[[Trajectory], list[int]]
    """The steps of an episode that ask the question."""
    sides: Callable[[Trajectory, int], tuple[list[str], list[str]]]
    """At one step: (the right actions, the other actions); the probe keeps steps where both are admissible."""


STAGES = {
    "tool": Stage("Is the type's step kept? The right-tool share once the object is held", held_states, tool_sides),
    "step": Stage("Is the type's step done? The tool against the target once the object is held", held_states,
                  step_sides),
    "after": Stage("Is the step kept once done? The target against another tool after the transformation",
                   transformed_states, after_sides),
    "find": Stage("Is where objects lie kept? The share of moves to the object's usual places", search_states,
                  search_sides),
    "place": Stage("Does the advice pull a carried object back to where it lies? The target against the object's "
                   "usual places", carried_states, place_sides),
}


def mass(logp: torch.Tensor, admissible: list[str], right: list[str], other: list[str]) -> tuple[float, float]:
    """P(the right actions) and P(the other actions) at one state."""
    probs = dict(zip(admissible, logp.exp().tolist()))
    return sum(probs[a] for a in right), sum(probs[a] for a in other)


def probe_states(trajectories: list[Trajectory], limit: int, seed: int,
                 stage: Stage = STAGES["tool"]) -> list[tuple[Trajectory, int]]:
    """The steps of ``trajectories`` that ask ``stage``'s question with both kinds of action admissible,
    at most ``limit`` (a fixed random sample: the same for every policy of the seed)."""
    states = [(traj, i) for traj in trajectories for i in stage.states(traj) if all(stage.sides(traj, i))]
    return random.Random(seed).sample(states, limit) if len(states) > limit else states


def score(actor: Actor, states: list[tuple[Trajectory, int]], advised: bool, stage: Stage) -> list[dict]:
    """Per state: its task type, the right actions' probability and share, plain or with the oracle's
    advice, and the share of a uniform choice among the actions compared (chance)."""
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
        right_actions, other_actions = stage.sides(traj, i)
        right, other = mass(logp, traj.steps[i].admissible, right_actions, other_actions)
        out.append({"type": traj.task.spec["goal"]["type"], "right": right,
                    "share": right / (right + other) if right + other > 0 else None,
                    "chance": len(right_actions) / (len(right_actions) + len(other_actions))})
    return out


def summary(rows: list[dict]) -> dict:
    """Mean share, right probability and chance over states, overall and per task type."""
    def means(part):
        shares = [r["share"] for r in part if r["share"] is not None]
        return {"states": len(part), "share": fmean(shares) if shares else None,
                "right": fmean(r["right"] for r in part), "chance": fmean(r["chance"] for r in part)}

    return means(rows) | {"by_type": {t: means([r for r in rows if r["type"] == t])
                                      for t in sorted({r["type"] for r in rows})}}


def probe_seed(config: str, seed: int, rounds: list[int], limit: int, stage: Stage = STAGES["tool"]) -> dict:
    """Every policy of one seed on the same states of ``stage``: the warm start, then GRPO's and the
    configuration's checkpoints after ``rounds``, each plain and with the oracle's advice."""
    runs = {name: run_folder(name, seed, REFERENCE_RUNS) for name in (GRPO, config)}
    params = read_run_params(runs[config])
    last = params.train.rounds - 1
    trajectories = [t for folder in runs.values() for k in (last - 1, last)
                    for t in read_rollouts(folder / f"round_{k:03d}" / "rollouts.parquet")]
    states = probe_states(trajectories, limit, seed, stage)
    policies = {"warm start": base_folder(runs[config].parent, BASES, "household", seed)}
    for name, folder in runs.items():
        for k in rounds:
            policies[f"{name} r{k}"] = folder / f"round_{k:03d}" / "checkpoint"
    out = {"seed": seed, "states": len(states), "policies": {}}
    for name, checkpoint in policies.items():
        if not checkpoint.is_dir():
            raise FileNotFoundError(f"{checkpoint}: no checkpoint (has the run finished its rounds?)")
        actor = Actor(load_policy(params.policy, checkpoint=checkpoint, seed=seed, envs=["household"]))
        out["policies"][name] = {context: summary(score(actor, states, context == "advice", stage))
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


def doc_paragraph(start: str) -> str:
    """The paragraph of this module's docstring, or the bullet of a list in it, that begins with ``start``."""
    pieces = [piece for block in __doc__.split("\n\n") for piece in block.replace("\n- ", "\n\n- ").split("\n\n")]
    return next(p.strip("\n") for p in pieces if p.startswith(start))


def markdown(report: dict) -> str:
    def pct(e):
        return f"{e['mean']:.1%} [{e['low']:.1%}, {e['high']:.1%}]"

    stage = report.get("stage", "tool")
    lines = [f"# {STAGES[stage].title}: {report['config']} against GRPO", "",
             *(line for start in (f"- ``{stage}``", "The states:", "    share", "Same states")
               for line in (doc_paragraph(start).replace("\n  ", " ").replace("\n", " "), "")),
             f"Seeds {report['seeds']}; {report['machine']}; command: `{report['command']}`.", "",
             "| policy | plain | with the oracle's advice |", "| --- | --- | --- |"]
    lines += [f"| {name} | {pct(p['plain'])} | {pct(p['advice'])} |"
              for name, p in report["pooled"]["policies"].items()]
    if "chance" in report["per_seed"][0]["policies"]["warm start"]["plain"]:
        chance = fmean(s["policies"]["warm start"]["plain"]["chance"] for s in report["per_seed"])
        lines.append(f"| chance (uniform over the actions compared) | {chance:.1%} | {chance:.1%} |")
    lines += ["", "| paired difference (points of share) | mean [95% interval] |", "| --- | --- |"]
    lines += [f"| {k} | {100 * e['mean']:+.1f} [{100 * e['low']:+.1f}, {100 * e['high']:+.1f}] |"
              for k, e in report["pooled"]["differences"].items()]
    types = sorted({t for s in report["per_seed"] for t in s["policies"]["warm start"]["plain"]["by_type"]})
    lines += ["", "By task type (mean over seeds of the share; plain / with the advice):", "",
              "| policy | " + " | ".join(SHORT_TYPE.get(t, t) for t in types) + " |", "|---" * (len(types) + 1) + "|"]
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
    parser.add_argument("--stage", choices=sorted(STAGES), default="tool", help="the question asked (default tool)")
    parser.add_argument("--states", type=int, default=400, help="states per seed, at most (a fixed sample)")
    parser.add_argument("--name", default="", help="suffix of the output files")
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = run_folder(args.config, args.seed[0], REFERENCE_RUNS)
    last = read_run_params(folder).train.rounds - 1
    rounds = sorted(set(args.round or [3, last]))
    per_seed = [probe_seed(args.config, s, rounds, args.states, STAGES[args.stage]) for s in args.seed]
    report = {"config": args.config, "stage": args.stage, "seeds": args.seed, "rounds": rounds,
              "machine": describe_machine(),
              "command": "benchmarks/step_probe.py " + " ".join(
                  [f"--config {args.config}", *(f"--seed {s}" for s in args.seed), *(f"--round {k}" for k in rounds),
                   *([f"--stage {args.stage}"] if args.stage != "tool" else [])]),
              "per_seed": per_seed, "pooled": pooled(per_seed, args.config, max(rounds))}
    stem = OUT / f"step_probe_{args.config}{'_' + args.stage if args.stage != 'tool' else ''}" \
                 f"{'_' + args.name if args.name else ''}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
