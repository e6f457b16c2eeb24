"""Does a fit to the advised teacher carry to states it was not fitted on, given more of them?

The distillation-ceiling probe (``distill_ceiling.py``) found that the plain student fits the frozen
advised teacher on the states it is trained on (reverse KL per state 0.02-0.11) but not on the next
iteration's (0.11-0.52), and that its success does not rise. It left open why: the plain context cannot
hold what the advice adds (the tiny model, its history), or the fit is made on too few states at a time
(each iteration's 16 tasks, trained on one after another, each fit overwriting the last). This probe
separates the two. It collects the states once, then fits a fresh plain copy of the student on the
states of the first N training tasks, for several N, with the same number of optimizer steps each, and
measures the KL on the states of held-out tasks that no N includes:

- the held-out KL falls as N grows, and plain success follows: the fit generalises given enough states
  at once, and training distils on too few (distilling on the states of several rounds would help);
- the held-out KL stays where it started whatever N, while the trained KL falls: what the advice adds
  is not something the plain context, as this model reads it, can predict; more states cannot help.

The teacher is a frozen copy with the oracle's advice in its prompt; the student a copy acting plain.
``--teacher base``: the seed's warm start (the learning benchmark's, ``--bases-dir``; its advice is
worth about 20 points, the scaffold's starting point); ``--teacher CONFIG``: an oracle-control sweep
row's final checkpoint (``internalization_sweep.py``), as in the ceiling probe. Per task the teacher
plays ``--members`` episodes advised and the student ``--members`` plain, on training tasks drawn
apart from the held-out ones; every state of both kinds is distilled (``distill.states: both``, the
advised ones with the block removed), each fit takes ``--epochs`` x ``grpo.minibatches`` steps of
the reverse KL alone at ``grpo.lr`` (AdamW without weight decay, as the runs' update), and the fitted
student is evaluated plain on the first ``--episodes`` test_seen tasks with the streams of the
teacher's advised evaluation (paired by task).

    .venv/bin/python benchmarks/distill_generalisation.py --seed 0 --seed 1 --tasks 16 --tasks 64 --tasks 256

Each seed's result is kept (benchmarks/sweep/internalization/generalisation/), so a rerun does only what
is new. Writes benchmarks/results/distill_generalisation_<teacher>.{json,md,png}.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sweep's rows, the ceiling probe's helpers
import internalization_sweep as sweep  # noqa: E402
from distill_ceiling import (  # noqa: E402
    advised_and_plain,
    final_checkpoint,
    interval,
    kl_per_state,
    success_by_task,
)

from edge.algorithms.contribution import group_contributions  # noqa: E402
from edge.algorithms.distill import distill_only_update, distill_samples, make_distill_loss  # noqa: E402
from edge.algorithms.grpo import UpdateConfig  # noqa: E402
from edge.benchmarking.learning import paired_difference  # noqa: E402
from edge.benchmarking.machine import describe_machine  # noqa: E402
from edge.config import load_params, with_overrides  # noqa: E402
from edge.envs.registry import generate_tasks  # noqa: E402
from edge.policy.actor import Actor  # noqa: E402
from edge.policy.model import load_policy  # noqa: E402

CACHE = sweep.ROOT / "generalisation"
SPLIT = "test_seen"


def teacher_source(teacher: str, seed: int, bases_dir: Path, reference_runs: Path):
    """(params, checkpoint) of the teacher: the seed's warm start with the project's parameters, or a sweep
    row's final checkpoint with that run's parameters."""
    if teacher == "base":
        checkpoint = bases_dir / f"base-household-s{seed}"
        if not (checkpoint / "config.json").exists():
            raise FileNotFoundError(f"{checkpoint}: no warm start for seed {seed} (make it with "
                                    f"`internalization_sweep.py --make-grpo --seed {seed}` or `edge bench learning`)")
        params = with_overrides(load_params("params.yaml"), [f"seed={seed}"])
        return params, checkpoint
    return final_checkpoint(sweep.run_folder(teacher, seed, reference_runs))


def split_pool(pool: list, seed: int, heldout: int) -> tuple[list, list]:
    """(held-out tasks, training tasks in the order the fits take them) from one shuffle of the whole pool,
    so that the first N training tasks are the same whichever other sizes a run asks for (``random.sample``
    with a larger count draws other tasks first)."""
    order = list(pool)
    random.Random(seed * 1_000_003 + 700_000).shuffle(order)
    return order[:heldout], order[heldout:]


def collect(teacher: Actor, student: Actor, tasks, members: int, stage: int, max_steps: int | None) -> list:
    """The distillation samples of ``tasks``: the teacher's advised episodes and the student's plain ones,
    every state of both kinds, with the frozen teacher's log-probabilities attached."""
    advised, plain = advised_and_plain(teacher, student, tasks, members, stage, max_steps)
    trajectories = advised + plain
    return distill_samples(teacher, trajectories, group_contributions(trajectories), "exact", states="both",
                           gate="retrieved"), fmean(t.won for t in advised), fmean(t.won for t in plain)


def probe(params, checkpoint: Path, label: str, seed: int, sizes: list[int], heldout: int, members: int,
          epochs: int, episodes: int, student_checkpoint: Path | None = None) -> dict:
    """The probe for one seed: the teacher is ``checkpoint`` with the oracle's advice, frozen; each fit starts
    a fresh student from ``student_checkpoint`` (default the same weights) and is trained on the states of the
    first N of the drawn training tasks, N in ``sizes``; ``params`` the run's (or the project's) parameters."""
    env = params.train.env
    torch.manual_seed(seed)
    teacher = Actor(load_policy(params.policy, checkpoint=checkpoint, seed=seed, envs=[env]))
    g = params.grpo
    update_cfg = UpdateConfig(g.lr, 1, g.minibatches, g.clip_low, g.clip_high, 0.0, g.loss_agg, g.max_grad_norm)
    pool = generate_tasks(env, "train", params.data.train_tasks, params.seed)
    if max(sizes) + heldout > len(pool):
        raise ValueError(f"--tasks {max(sizes)} + --heldout {heldout} exceed the {len(pool)} training tasks")
    held_tasks, train_tasks = split_pool(pool, seed, heldout)
    started = time.perf_counter()
    student_checkpoint = student_checkpoint or checkpoint
    student = Actor(load_policy(params.policy, checkpoint=student_checkpoint, seed=seed, envs=[env]))
    stage = seed * 1_000_003 + 800_000
    held, teacher_won_held, student_won_held = collect(teacher, student, held_tasks, members, stage,
                                                       params.rollout.max_steps)
    # Training states in nested chunks, so that the fit on N tasks uses exactly the first N tasks' states.
    chunks, edges = [], [0, *sorted(set(sizes))]
    for a, b in zip(edges, edges[1:]):
        chunks.append(collect(teacher, student, train_tasks[a:b], members, stage + 1, params.rollout.max_steps)[0])
    collect_seconds = time.perf_counter() - started
    eval_tasks = generate_tasks(env, SPLIT, episodes, params.seed)
    eval_seed = params.seed * 7919 + 17
    teacher_advised = success_by_task(teacher, eval_tasks, eval_seed, advised=True)
    start_plain = success_by_task(student, eval_tasks, eval_seed, advised=False)
    held_before = kl_per_state(student, held)
    fits = []
    for size in sorted(set(sizes)):
        fit_started = time.perf_counter()
        trained = [s for chunk in chunks[:edges.index(size)] for s in chunk]
        fresh = Actor(load_policy(params.policy, checkpoint=student_checkpoint, seed=seed, envs=[env]))
        optimizer = torch.optim.AdamW(fresh.policy.model.parameters(), lr=g.lr, weight_decay=0.0)
        before = kl_per_state(fresh, trained)
        steps = distill_only_update(fresh, optimizer, trained, update_cfg, epochs,
                                    torch.Generator().manual_seed(stage + size), make_distill_loss(1.0, "exact"))
        plain = success_by_task(fresh, eval_tasks, eval_seed, advised=False)
        fits.append({"tasks": size, "states": len(trained), "optimizer_steps": int(steps["optimizer_steps"]),
                     "train_kl_before": before, "train_kl_after": kl_per_state(fresh, trained),
                     "heldout_kl_after": kl_per_state(fresh, held), "plain_success": fmean(plain.values()),
                     "plain_tasks": plain, "seconds": time.perf_counter() - fit_started})
        print(f"  {label} seed {seed}, {size} tasks ({len(trained)} states): train KL {before:.3f} -> "
              f"{fits[-1]['train_kl_after']:.3f}, held-out {held_before:.3f} -> {fits[-1]['heldout_kl_after']:.3f}, "
              f"plain {fits[-1]['plain_success']:.1%}", flush=True)
    return {"teacher": label, "checkpoint": str(checkpoint), "student": str(student_checkpoint), "seed": seed,
            "members": members, "epochs": epochs, "episodes": episodes, "heldout_tasks": heldout,
            "heldout_states": len(held),
            "heldout_kl_before": held_before, "heldout_teacher_won": teacher_won_held,
            "heldout_student_won": student_won_held, "collect_seconds": collect_seconds,
            "teacher_advised": fmean(teacher_advised.values()), "start_plain": fmean(start_plain.values()),
            "teacher_tasks": teacher_advised, "start_tasks": start_plain, "fits": fits,
            "machine": describe_machine()}


def paired_fit(results: dict[int, dict], seeds: list[int], fits: list[dict], key: str) -> dict:
    """The fits' plain success (one per seed) − the seeds' ``key`` evaluation, paired by seed and task."""
    return paired_difference([f["plain_success"] for f in fits], [fmean(results[s][key].values()) for s in seeds],
                             seeds, [(f["plain_tasks"], results[s][key]) for f, s in zip(fits, seeds)])


def summary(results: dict[int, dict]) -> dict:
    """Per number of fitted tasks, over seeds: the held-out KL, and plain success against the start and the
    teacher with the advice (paired by seed and task)."""
    seeds = sorted(results)
    out = {}
    for i, fit in enumerate(results[seeds[0]]["fits"]):
        fits = [results[s]["fits"][i] for s in seeds]
        out[str(fit["tasks"])] = {"heldout_kl_after": fmean(f["heldout_kl_after"] for f in fits),
                                  "train_kl_after": fmean(f["train_kl_after"] for f in fits),
                                  "plain_success": fmean(f["plain_success"] for f in fits),
                                  "minus_start": paired_fit(results, seeds, fits, "start_tasks"),
                                  "minus_teacher": paired_fit(results, seeds, fits, "teacher_tasks")}
    return out


def markdown(teacher: str, results: dict[int, dict], summ: dict, command: str, name: str) -> str:
    seeds = sorted(results)
    first = results[seeds[0]]
    whose = "each seed's warm start" if teacher == "base" else f"{teacher}'s final checkpoints"
    lines = [f"# Does the fit to the advised teacher carry to new states? ({teacher})", "",
             "\n\n".join(__doc__.split("\n\n")[1:4]), "",
             f"Teacher: {whose} with the oracle's advice; "
             f"seeds {', '.join(map(str, seeds))}; {first['members']} advised and "
             f"{first['members']} plain episodes a task; held-out: {first['heldout_tasks']} training tasks "
             f"({first['heldout_states']} states for seed {seeds[0]}); each fit {first['epochs']} epochs; evaluation "
             f"on the first {first['episodes']} {SPLIT} tasks, paired by task. Command: `{command}`. "
             f"Machine: {first['machine']}.", "",
             f"![held-out KL and plain success against the fitted tasks]({name}.png)", "",
             "| seed | fitted tasks | states | optimizer steps | train KL before → after | held-out KL before → after "
             "| plain | plain − start | teacher with advice |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in seeds:
        r = results[s]
        for f in r["fits"]:
            lines.append(f"| {s} | {f['tasks']} | {f['states']} | {f['optimizer_steps']} | "
                         f"{f['train_kl_before']:.3f} → {f['train_kl_after']:.3f} | "
                         f"{r['heldout_kl_before']:.3f} → {f['heldout_kl_after']:.3f} | {f['plain_success']:.1%} | "
                         f"{100 * (f['plain_success'] - r['start_plain']):+.1f} (start {r['start_plain']:.1%}) | "
                         f"{r['teacher_advised']:.1%} |")
    if len(seeds) > 1:
        lines += ["", "Over seeds (points, Student-t 95% interval, paired by seed and task):", "",
                  "| fitted tasks | train KL after | held-out KL after | plain | plain − start "
                  "| plain − teacher with advice |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for size, row in summ.items():
            lines.append(f"| {size} | {row['train_kl_after']:.3f} | {row['heldout_kl_after']:.3f} | "
                         f"{row['plain_success']:.1%} | {interval(row['minus_start'])} | "
                         f"{interval(row['minus_teacher'])} |")
    return "\n".join(lines + [""])


def plot(results: dict[int, dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_k, ax_s) = plt.subplots(1, 2, figsize=(10, 4))
    for s, r in sorted(results.items()):
        sizes = [f["tasks"] for f in r["fits"]]
        line, = ax_k.plot(sizes, [f["heldout_kl_after"] for f in r["fits"]], marker="o", label=f"seed {s} held-out")
        ax_k.plot(sizes, [f["train_kl_after"] for f in r["fits"]], color=line.get_color(), linestyle=":")
        ax_k.axhline(r["heldout_kl_before"], color=line.get_color(), linestyle="--", linewidth=1)
        ax_s.plot(sizes, [100 * f["plain_success"] for f in r["fits"]], marker="o", color=line.get_color(),
                  label=f"seed {s} plain")
        ax_s.axhline(100 * r["teacher_advised"], color=line.get_color(), linestyle="--", linewidth=1)
        ax_s.axhline(100 * r["start_plain"], color=line.get_color(), linestyle=":", linewidth=1)
    for ax in (ax_k, ax_s):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("training tasks fitted")
    ax_k.set(ylabel="reverse KL per state", title="held-out (solid; dashed: before), trained (dotted)")
    ax_s.set(ylabel=f"{SPLIT} success (%)", title="plain after the fit (dashed: teacher advised, dotted: start)")
    ax_k.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="base",
                        help="'base' (each seed's warm start) or an oracle-control row of internalization_sweep.py")
    parser.add_argument("--seed", type=int, action="append", help="repeatable; default 0 1")
    parser.add_argument("--tasks", type=int, action="append",
                        help="training tasks fitted; repeatable; default 16 64 256")
    parser.add_argument("--heldout", type=int, default=64, help="held-out training tasks the KL is measured on")
    parser.add_argument("--members", type=int, default=2, help="advised and plain episodes a task, each")
    parser.add_argument("--epochs", type=int, default=10, help="epochs of grpo.minibatches steps per fit")
    parser.add_argument("--episodes", type=int, default=400, help="evaluation tasks (test_seen)")
    parser.add_argument("--bases-dir", type=Path, default=sweep.BASES)
    parser.add_argument("--reference-runs", type=Path, default=Path("benchmarks/runs"))
    args = parser.parse_args()
    if args.teacher != "base" and (args.teacher not in sweep.CONFIGS or sweep.method_of(args.teacher) != sweep.ORACLE):
        parser.error(f"--teacher {args.teacher}: expected 'base' or an oracle-control row of internalization_sweep.py")
    sizes = sorted(set(args.tasks or [16, 64, 256]))
    if min(sizes) < 1 or args.heldout < 1 or args.members < 1:
        parser.error("--tasks, --heldout and --members must be at least 1")
    seeds = args.seed or [0, 1]
    torch.set_num_threads(1)
    CACHE.mkdir(parents=True, exist_ok=True)
    results = {}
    for s in seeds:
        cached = CACHE / (f"{args.teacher}-s{s}-t{'-'.join(map(str, sizes))}-h{args.heldout}-m{args.members}"
                          f"-e{args.epochs}-n{args.episodes}.json")
        if not cached.exists():
            print(f"{args.teacher} seed {s}", flush=True)
            params, checkpoint = teacher_source(args.teacher, s, args.bases_dir, args.reference_runs)
            cached.write_text(json.dumps(probe(params, checkpoint, args.teacher, s, sizes, args.heldout, args.members,
                                               args.epochs, args.episodes), indent=1))
        results[s] = json.loads(cached.read_text())
    summ = summary(results)
    name = f"distill_generalisation_{args.teacher}"
    command = "benchmarks/distill_generalisation.py " + " ".join(sys.argv[1:])
    (sweep.OUT / f"{name}.json").write_text(json.dumps({"summary": summ, "runs": results}, indent=1))
    (sweep.OUT / f"{name}.md").write_text(markdown(args.teacher, results, summ, command, name))
    plot(results, sweep.OUT / f"{name}.png")
    print((sweep.OUT / f"{name}.md").read_text())


if __name__ == "__main__":
    main()
