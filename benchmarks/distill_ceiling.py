"""How far can distillation alone carry the plain policy? Issue 14's limit, probed on finished runs.

In training the teacher and the student are one network (the advised and the plain context of the
collecting weights), each round's teacher is one update further on, its states are new, and the pull rides
on GRPO's six optimizer steps a round. On the oracle control the reverse KL per distilled state stays at
about 0.28 whatever the pull (internalization.md: "the KL that stays"), and the plain policy keeps about
90% of the advised success. This probe removes those limits one run at a time:

- the **teacher** is a frozen copy of the run's final checkpoint with the oracle's advice in its prompt;
- the **student** is a second copy, acting plain, distilled on nothing else: each iteration it plays
  ``tasks_per_round`` training tasks plain (half of each group) while the teacher plays them advised (the
  other half), and it takes ``--epochs`` x ``grpo.minibatches`` steps of the reverse KL towards the
  teacher on both kinds of states (``distill.states: both``, the advised ones with the block removed), at
  ``grpo.lr``, with no PG term.

Per iteration it records the reverse KL per distilled state before the update (the gap on new states)
and after it (on the states just trained on), and every ``--eval-every`` iterations the student's plain
success on the first ``--episodes`` test_seen tasks, with the same streams as the teacher's advised and
plain evaluation (paired task by task). Reading:

- the KL falls and plain success climbs to the teacher's advised success: the plain context can hold the
  advised behaviour, and what stops training short is the procedure (shared weights, a moving target, the
  budget of steps);
- the KL falls and success does not follow: matching the teacher's choices on these states is not what
  makes its episodes win;
- the KL stays: the plain context (the tiny model, one step of history) cannot represent what the advice
  adds.

    .venv/bin/python benchmarks/distill_ceiling.py --config o31 --seed 0 --seed 1 --seed 2

``--states won`` distils only the states of the teacher's advised episodes that won (its choices where they
led to a win); ``--student base`` starts the student from the run's warm start instead of its final weights.

Each seed's result is kept (benchmarks/sweep/internalization/ceiling/), so a rerun only does what is new.
Writes benchmarks/results/distill_ceiling_<config>.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from statistics import fmean

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's configurations and where their runs are
import internalization_sweep as sweep  # noqa: E402

from edge.algorithms.contribution import group_contributions  # noqa: E402
from edge.algorithms.distill import (  # noqa: E402
    distill_only_update,
    distill_samples,
    make_distill_loss,
    reverse_kl_exact,
)
from edge.algorithms.grpo import UpdateConfig  # noqa: E402
from edge.benchmarking.learning import paired_difference  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.config import run_params  # noqa: E402
from edge.envs.registry import generate_tasks  # noqa: E402
from edge.evaluate import evaluate  # noqa: E402
from edge.policy.actor import Actor  # noqa: E402
from edge.policy.model import load_policy  # noqa: E402
from edge.rollout import rollout  # noqa: E402
from edge.warmup import true_advice_experience  # noqa: E402

CACHE = sweep.ROOT / "ceiling"
DISTILLED = {"both": "the student's own plain states and the teacher's advised ones, the block removed "
                     "(distill.states: both)",
             "won": "only the states of the teacher's advised episodes that won, the block removed"}
SPLIT = "test_seen"


def kl_per_state(student: Actor, samples) -> float:
    """Mean reverse KL(student || teacher) over the distilled states, at the student's current weights."""
    if not samples:
        return 0.0
    with torch.inference_mode():
        logps = student.action_logprobs([s.prompt_ids for s in samples], [s.candidate_ids for s in samples])
    return fmean(float(reverse_kl_exact(lp, torch.tensor(s.extras["teacher"]))) for lp, s in zip(logps, samples))


def success_by_task(actor: Actor, tasks, seed: int, advised: bool) -> dict[str, float]:
    """One episode per task, plain or with the oracle's advice; the same streams for every policy."""
    result = evaluate(actor, tasks, seed, experience_for=true_advice_experience if advised else None)
    return {task: float(won) for task, won in result.won_by_task.items()}


def final_checkpoint(folder: Path):
    """(params, checkpoint) of a finished run: the parameters its folder records and its last round's weights."""
    params = run_params(json.loads((folder / "params.json").read_text()))
    checkpoint = folder / f"round_{params.train.rounds - 1:03d}" / "checkpoint"
    if not checkpoint.exists():
        raise FileNotFoundError(f"{checkpoint}: the run has no final checkpoint (expected after its last round)")
    return params, checkpoint


def advised_and_plain(teacher: Actor, student: Actor, tasks, members: int, stage: int, max_steps: int | None):
    """(the teacher's advised episodes, the student's plain ones) of ``tasks``: each group's first ``members``
    members played by the teacher with the oracle's advice, the next ``members`` by the student plain, every
    member on its own stream of ``stage``."""
    advised = rollout(teacher, tasks, 2 * members, stage, conditioned_per_group=members, members=range(members),
                      experiences={t.task_id: true_advice_experience(t) for t in tasks}, max_steps=max_steps)
    plain = rollout(student, tasks, 2 * members, stage, members=range(members, 2 * members), max_steps=max_steps)
    return advised, plain


def probe(folder: Path, seed: int, iterations: int, epochs: int, episodes: int, eval_every: int,
          student_checkpoint: Path | None = None, states: str = "both") -> dict:
    """The probe on the run in ``folder`` (an oracle-control run): its final checkpoint is the teacher and,
    unless ``student_checkpoint`` names another (``--student base``: the run's warm start), the student.
    ``states``: ``both`` (the student's plain states and the teacher's advised ones) or ``won`` (only the
    states of the teacher's advised episodes that won: its choices where they led to a win)."""
    if states not in ("both", "won"):
        raise ValueError(f"states: expected 'both' or 'won', got {states!r}")
    params, checkpoint = final_checkpoint(folder)
    env = params.train.env
    torch.manual_seed(seed)
    teacher = Actor(load_policy(params.policy, checkpoint=checkpoint, seed=seed, envs=[env]))
    student = Actor(load_policy(params.policy, checkpoint=student_checkpoint or checkpoint, seed=seed, envs=[env]))
    g = params.grpo
    update_cfg = UpdateConfig(g.lr, 1, g.minibatches, g.clip_low, g.clip_high, 0.0, g.loss_agg, g.max_grad_norm)
    # torch's default weight decay (0.01), where the runs' update uses grpo.weight_decay (0): over the
    # probe's 100-200 steps at lr 1e-3 it shrinks the weights by about 0.1-0.2%, what the results were made with.
    optimizer = torch.optim.AdamW(student.policy.model.parameters(), lr=g.lr, weight_decay=0.01)
    loss = make_distill_loss(1.0, "exact")
    eval_tasks = generate_tasks(env, SPLIT, episodes, params.seed)
    eval_seed = params.seed * 7919 + 17  # one stream for every evaluation of this seed: paired by task
    teacher_advised = success_by_task(teacher, eval_tasks, eval_seed, advised=True)
    start_plain = success_by_task(student, eval_tasks, eval_seed, advised=False)
    pool = generate_tasks(env, "train", params.data.train_tasks, params.seed)
    max_steps = params.rollout.max_steps
    half = params.rollout.group_size // 2
    rows, evals = [], {"0": start_plain}  # by iteration, as JSON keys
    for i in range(1, iterations + 1):
        started = time.perf_counter()
        # Training tasks the run's own rounds did not draw in this order (another stream).
        tasks = random.Random(seed * 1_000_003 + 500_000 + i).sample(pool, min(params.rollout.tasks_per_round,
                                                                                len(pool)))
        stage = seed * 1_000_003 + 900_000 + i
        advised, plain = advised_and_plain(teacher, student, tasks, half, stage, max_steps)
        trajectories = advised + plain
        contributions = group_contributions(trajectories)  # every group that retrieved, weight 1
        if states == "both":
            samples = distill_samples(teacher, trajectories, contributions, "exact", states="both", gate="retrieved")
        else:
            samples = distill_samples(teacher, [t for t in advised if t.won], contributions, "exact",
                                      states="conditioned", gate="retrieved")
        before = kl_per_state(student, samples)
        generator = torch.Generator().manual_seed(stage)
        steps = distill_only_update(student, optimizer, samples, update_cfg, epochs, generator, loss)
        row = {"iteration": i, "states": len(samples), "kl_before": before, "kl_after": kl_per_state(student, samples),
               "optimizer_steps": int(steps["optimizer_steps"]),
               "teacher_won": fmean(t.won for t in advised), "student_won": fmean(t.won for t in plain)}
        if i % eval_every == 0 or i == iterations:
            evals[str(i)] = success_by_task(student, eval_tasks, eval_seed, advised=False)
            row["plain_success"] = fmean(evals[str(i)].values())
        row["seconds"] = time.perf_counter() - started
        rows.append(row)
        print(f"  {folder.name} iteration {i}/{iterations}: KL {before:.3f} -> {row['kl_after']:.3f}"
              + (f", plain {row['plain_success']:.1%}" if "plain_success" in row else ""), flush=True)
    return {"run": str(folder), "student": str(student_checkpoint or checkpoint), "states": states, "seed": seed,
            "episodes": episodes, "epochs": epochs, "iterations": iterations,
            "teacher_advised": fmean(teacher_advised.values()), "start_plain": fmean(start_plain.values()),
            "evals": {i: fmean(e.values()) for i, e in evals.items()},
            "final_tasks": evals[str(iterations)], "teacher_tasks": teacher_advised, "start_tasks": start_plain,
            "rows": rows, "machine": describe_machine()}


def summary(config: str, results: dict[int, dict]) -> dict:
    """Over seeds: the final plain success against the start and the teacher's advised success, paired."""
    seeds = sorted(results)

    def paired(key_a, key_b):
        return paired_difference([fmean(results[s][key_a].values()) for s in seeds],
                                 [fmean(results[s][key_b].values()) for s in seeds], seeds,
                                 [(results[s][key_a], results[s][key_b]) for s in seeds])

    return {"config": config, "seeds": seeds,
            "final_minus_start": paired("final_tasks", "start_tasks"),
            "final_minus_teacher": paired("final_tasks", "teacher_tasks"),
            "teacher_minus_start": paired("teacher_tasks", "start_tasks")}


def interval(d: dict) -> str:
    return f"{100 * d['mean']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"


def markdown(config: str, results: dict[int, dict], summ: dict, command: str, name: str) -> str:
    seeds = sorted(results)
    any_run = results[seeds[0]]
    lines = [f"# Distillation alone, from a frozen teacher: the ceiling of internalization ({config})", "",
             "\n\n".join(__doc__.split("\n\n")[1:5]), "",
             f"Runs: {config}'s final checkpoints (internalization.md), seeds {', '.join(map(str, seeds))}; "
             f"{any_run['iterations']} iterations of {any_run['epochs']} epochs; evaluation on the first "
             f"{any_run['episodes']} {SPLIT} tasks, one stream per seed for every evaluation (paired by task). "
             f"Command: `{command}`. Machine: {any_run['machine']}.", "",
             f"Distilled states: {DISTILLED[any_run.get('states', 'both')]}.", "",
             f"![plain success and KL per iteration]({name}.png)", "",
             "| seed | teacher with the advice | plain at the start | plain after | after − start | "
             "KL per state, first iteration (before → after) | last iteration (before → after) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for s in seeds:
        r = results[s]
        first, last = r["rows"][0], r["rows"][-1]
        final = r["evals"][str(r["iterations"])]
        lines.append(f"| {s} | {r['teacher_advised']:.1%} | {r['start_plain']:.1%} | {final:.1%} | "
                     f"{100 * (final - r['start_plain']):+.1f} | {first['kl_before']:.3f} → {first['kl_after']:.3f} | "
                     f"{last['kl_before']:.3f} → {last['kl_after']:.3f} |")
    if len(seeds) > 1:
        lines += ["", f"Over seeds (points, Student-t 95% interval, paired by seed): plain after − at the start "
                  f"{interval(summ['final_minus_start'])}; plain after − the teacher with the advice "
                  f"{interval(summ['final_minus_teacher'])}; the teacher's advice over the start "
                  f"{interval(summ['teacher_minus_start'])}."]
    return "\n".join(lines + [""])


def plot(config: str, results: dict[int, dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_s, ax_k) = plt.subplots(1, 2, figsize=(10, 4))
    for s, r in sorted(results.items()):
        xs = sorted(int(i) for i in r["evals"])
        line, = ax_s.plot(xs, [100 * r["evals"][str(i)] for i in xs], marker="o", label=f"seed {s} plain")
        ax_s.axhline(100 * r["teacher_advised"], color=line.get_color(), linestyle="--", linewidth=1)
        its = [row["iteration"] for row in r["rows"]]
        ax_k.plot(its, [row["kl_before"] for row in r["rows"]], color=line.get_color(), label=f"seed {s} before")
        ax_k.plot(its, [row["kl_after"] for row in r["rows"]], color=line.get_color(), linestyle=":")
    ax_s.set(xlabel="iteration", ylabel=f"{SPLIT} success (%)",
             title="student plain (solid) vs teacher with advice (dashed)")
    ax_k.set(xlabel="iteration", ylabel="reverse KL per distilled state",
             title="before the update (solid), after (dotted)")
    ax_s.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="o31", help="the sweep row whose final checkpoints are the teachers")
    parser.add_argument("--seed", type=int, action="append", help="repeatable; default 0 1 2")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=4, help="epochs of grpo.minibatches steps per iteration")
    parser.add_argument("--episodes", type=int, default=400, help="evaluation tasks (test_seen)")
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--student", choices=["final", "base"], default="final",
                        help="the student's starting weights: the run's final checkpoint or its warm start")
    parser.add_argument("--states", choices=["both", "won"], default="both",
                        help="distilled states: the student's and the teacher's, or the teacher's won episodes' only")
    parser.add_argument("--reference-runs", type=Path, default=Path("benchmarks/runs"))
    args = parser.parse_args()
    if args.config not in sweep.CONFIGS or sweep.method_of(args.config) != sweep.ORACLE:
        parser.error(f"--config {args.config}: expected an oracle-control row of internalization_sweep.py (o…)")
    seeds = args.seed or [0, 1, 2]
    torch.set_num_threads(1)
    CACHE.mkdir(parents=True, exist_ok=True)
    results = {}
    # The options off their defaults name the result: distill_ceiling_o31, distill_ceiling_o31_base_won, ...
    variant = "".join(f"_{v}" for v, default in ((args.student, "final"), (args.states, "both")) if v != default)
    for s in seeds:
        cached = CACHE / f"{args.config}{variant.replace('_', '-')}-s{s}-i{args.iterations}-e{args.epochs}" \
                         f"-n{args.episodes}.json"
        if not cached.exists():
            print(f"{args.config} seed {s}", flush=True)
            folder = sweep.run_folder(args.config, s, args.reference_runs)
            base = None
            if args.student == "base":
                base = run_params(json.loads((folder / "params.json").read_text())).train.base_checkpoint
            cached.write_text(json.dumps(probe(folder, s, args.iterations, args.epochs, args.episodes,
                                               args.eval_every, base, args.states), indent=1))
        results[s] = json.loads(cached.read_text())
    summ = summary(args.config, results)
    name = f"distill_ceiling_{args.config}{variant}"
    command = "benchmarks/distill_ceiling.py " + " ".join(sys.argv[1:])
    (sweep.OUT / f"{name}.json").write_text(json.dumps({"summary": summ, "runs": results}, indent=1))
    (sweep.OUT / f"{name}.md").write_text(markdown(args.config, results, summ, command, name))
    plot(args.config, results, sweep.OUT / f"{name}.png")
    print((sweep.OUT / f"{name}.md").read_text())


if __name__ == "__main__":
    main()
