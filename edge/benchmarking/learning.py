"""The learning benchmark (`edge bench learning`): every method, several seeds, paired statistics.

Protocol. For each environment and seed a base checkpoint is warm-started with that seed (its
demonstrations, initialisation and clone order), and every method of the seed starts from it, so
the seeds vary the warm start as well as training (``--shared-warm-start``: one base, seed
``params.seed``, for all seeds, as the benchmark did before). Each (environment, method, seed) is
one ordinary ``edge train`` run in its own process with one torch thread, so a run gives the same
numbers whatever ``--jobs`` is, and an interrupted benchmark resumes: finished runs are skipped,
half-finished ones resume from their last completed stage. All methods get the same budget: the
same rounds of N x G episodes and the same optimizer steps per round (``grpo.minibatches``); the
environment steps those episodes took are counted and are the curves' x axis. The seed fixes the
training tasks, sampling streams and the evaluation tasks, so runs with the same seed are paired:
every method is compared with GRPO seed by seed, and within a seed task by task.

Reported per environment, method and evaluation split: final plain success, scaffolded success
(evaluated with the bank: tasks that retrieve something see it, the rest play as plain) and retention,
each a mean over seeds with a 95% percentile-bootstrap interval; for each method against GRPO, the
paired difference of final plain success with its Student-t interval and an exact sign-flip
permutation p-value (see ``stats`` for why the two intervals differ).

Where the runs execute is the one thing ``--ray ADDRESS`` changes: each warm start and each run is then
a Ray task on that cluster (``on_ray.py``), the same ``edge`` command with the same arguments and log
file, against the same run folder, which every node must see at the same path. Scheduling, resuming,
failure reports and the report itself are this module's, for both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from statistics import StatisticsError, correlation, fmean, stdev

from edge.benchmarking.machine import describe_machine
from edge.benchmarking.stats import (
    bootstrap_mean,
    paired_permutation_p,
    paired_task_difference,
    smallest_p,
    t_interval_mean,
)
from edge.config import METHODS

BASELINE = "grpo"


@dataclass
class LearningBenchConfig:
    """What `edge bench learning` runs; every field is a command-line option."""

    envs: list[str] = field(default_factory=lambda: ["household", "shop"])
    """Environments with a warm start (see ``warmup.env``)."""
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    """Methods to compare; ``grpo`` must be among them for the paired differences."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """Training seeds; a seed's runs are paired across methods."""
    budget: float = 1.0
    """Multiplies ``train.rounds`` (the rollout budget); 4 on a bigger machine means 4x the episodes."""
    eval_episodes: int = 400
    """Episodes at the base and the final point, per split and condition (plain / with bank)."""
    intermediate_episodes: int | None = 200
    """Episodes at the curve's points in between (a prefix of the same tasks); None: ``eval_episodes``."""
    splits: list[str] = field(default_factory=lambda: ["test_seen", "test_unseen"])
    eval_every: int = 4
    """Evaluate every this many rounds (and always after the last), for the curves."""
    jobs: int = 2
    """Runs (and warm starts) in parallel, one torch thread each; set to the number of cores. 1: the warm
    starts print their progress on the console. 0: as many as this machine
    has cores, or with ``ray`` as many as the cluster's CPUs (and GPUs) hold at ``ray_cpus`` (``ray_gpus``)
    per run."""
    params: Path = Path("params.yaml")
    runs_dir: Path = Path("benchmarks/runs")
    out_dir: Path = Path("benchmarks/results")
    name: str = "learning"
    """Stem of the result files (``<out_dir>/<name>.md`` and ``.json``)."""
    extra: list[str] = field(default_factory=list)
    """More ``section.key=value`` overrides for every run (and the warm starts)."""
    report_only: bool = False
    """Train nothing: rebuild the tables from the finished runs in ``runs_dir``."""
    shared_warm_start: bool = False
    """One warm start (seed ``params.seed``) for every seed instead of one per seed."""
    bases_dir: Path | None = None
    """Where the warm starts are built and reused (default ``runs_dir``); benchmarks that differ only
    in training settings (a sweep) can share them."""
    warm_start_env: str | None = None
    """The environment the warm starts are made in (default: each run's own). Another asks how a policy
    taught in one world adapts to a world that changed: ``household_moved`` runs from ``household``'s."""
    ray: str | None = None
    """Address of a Ray cluster (``host:port`` of its head, or ``auto``): every warm start and run is a
    Ray task there; None runs them as subprocesses of this machine. The working folder (``params``,
    ``runs_dir``, ``out_dir``) must be on a filesystem every node mounts at the same path."""
    ray_cpus: float = 1.0
    """CPUs a run (or warm start) reserves on the cluster: it uses one torch thread."""
    ray_gpus: float = 0.0
    """GPUs a run reserves (with ``--set policy.device=cuda``); Ray sets its ``CUDA_VISIBLE_DEVICES``."""


def _edge_command() -> list[str]:
    return [sys.executable, "-m", "edge.cli"]


RUN_ENVIRONMENT = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                   "HF_HUB_OFFLINE": "1"}
"""Set for every run: one thread per run, so results do not depend on how many runs share a machine."""


def _child_env() -> dict[str, str]:
    return dict(os.environ) | RUN_ENVIRONMENT


Launch = Callable[[list[str], Path], int]
"""Runs ``edge <arguments>`` with its output appended to a log file; returns its exit status. Where it
runs is the launcher's business: :func:`run_locally` here, ``on_ray.RayLauncher`` on a cluster."""


def run_locally(arguments: list[str], log_path: Path) -> int:
    """``edge <arguments>`` in a subprocess of this machine, its output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        return subprocess.run([*_edge_command(), *arguments], env=_child_env(), stdout=log,
                              stderr=subprocess.STDOUT).returncode


def warm_start_seed(cfg: LearningBenchConfig, seed: int) -> int:
    """The seed the runs of ``seed`` are warm-started with: their own, or ``params.seed`` for all."""
    from edge.config import load_params, with_overrides

    return with_overrides(load_params(cfg.params), cfg.extra).seed if cfg.shared_warm_start else seed


def base_folder(cfg: LearningBenchConfig, env: str, seed: int) -> Path:
    """Where the warm start of the runs of ``seed`` on ``env`` lives."""
    return (cfg.bases_dir or cfg.runs_dir) / f"base-{cfg.warm_start_env or env}-s{warm_start_seed(cfg, seed)}"


def base_checkpoint(cfg: LearningBenchConfig, env: str, seed: int, launch: Launch | None = None) -> Path:
    """The warm start the runs of ``seed`` on ``env`` begin from (built once, then reused). Built here with
    its output on the console, or through ``launch`` with its output in ``<runs_dir>/logs``."""
    folder, seed = base_folder(cfg, env, seed), warm_start_seed(cfg, seed)
    # Built: a warm start's report is there, or a sealed checkpoint (a link to another run's final policy).
    if not (folder / "warmup.json").exists() and not (folder / "edge_manifest.json").exists():
        arguments = ["warmup", "--params", str(cfg.params), "--out", str(folder),
                     "--set", f"warmup.env={cfg.warm_start_env or env}",
                     *sum((["--set", s] for s in cfg.extra), []), "--set", f"seed={seed}"]
        if launch is None:
            subprocess.run([*_edge_command(), *arguments], check=True, env=_child_env())
        else:
            log_path = cfg.runs_dir / "logs" / f"{folder.name}.log"
            code = launch(arguments, log_path)
            if code != 0:
                raise RuntimeError(f"warm start {folder.name} failed (exit {code}); its output is in {log_path}")
    return folder


def rounds_for(cfg: LearningBenchConfig) -> int:
    from edge.config import load_params, with_overrides

    params = with_overrides(load_params(cfg.params), cfg.extra)
    return max(1, round(params.train.rounds * cfg.budget))


def run_name(env: str, method: str, seed: int) -> str:
    return f"{env}-{method}-s{seed}"


def round_dir_name(k: int) -> str:
    return f"round_{k:03d}"


def train_arguments(cfg: LearningBenchConfig, env: str, method: str, seed: int, base: Path, rounds: int) -> list[str]:
    """The ``edge train`` arguments of one benchmark run."""
    splits = "[" + ",".join(cfg.splits) + "]"
    return ["train", "--params", str(cfg.params), "--method", method, "--env", env,
            "--seed", str(seed), "--rounds", str(rounds), "--run-name", run_name(env, method, seed), "--no-track",
            "--set", f"train.base_checkpoint={base}", "--set", f"train.runs_dir={cfg.runs_dir}",
            "--set", f"eval.episodes={cfg.eval_episodes}", "--set", f"eval.splits={splits}",
            "--set", f"eval.every={cfg.eval_every}",
            "--set", f"eval.intermediate_episodes={cfg.intermediate_episodes or 'null'}",
            # The base checkpoint's evaluation is the same for every method of a seed: done once.
            "--set", f"eval.base_cache_dir={cfg.runs_dir / 'base-evals'}",
            *sum((["--set", s] for s in cfg.extra), [])]


def train_one(cfg: LearningBenchConfig, env: str, method: str, seed: int, base: Path, rounds: int,
              log_dir: Path, launch: Launch = run_locally) -> Path:
    """One training run in its own process (here, or where ``launch`` puts it); returns its folder
    (resumes if it exists)."""
    name = run_name(env, method, seed)
    log_path = log_dir / f"{name}.log"
    code = launch(train_arguments(cfg, env, method, seed, base, rounds), log_path)
    if code != 0:
        # Finished runs are kept; the same command resumes this one from its last completed stage.
        raise RuntimeError(f"run {name} failed (exit {code}); its output is in {log_path}")
    return cfg.runs_dir / name


def evaluation_row(ev: dict, splits: list[str]) -> dict:
    """One evaluation (``{split: {"plain": EvalResult dict, "with_bank": ..., "retention": ...}}``) as a
    curve point: ``<split>_plain``, ``<split>_plain_score`` and, with a bank, ``_with_bank``, its score and
    ``_retention``."""
    row = {}
    for split in splits:
        row[f"{split}_plain"] = ev[split]["plain"]["success"]
        row[f"{split}_plain_score"] = ev[split]["plain"]["score"]
        if "with_bank" in ev[split]:
            row[f"{split}_with_bank"] = ev[split]["with_bank"]["success"]
            row[f"{split}_with_bank_score"] = ev[split]["with_bank"]["score"]
            row[f"{split}_retention"] = ev[split]["retention"]
    return row


def task_outcomes(ev: dict, splits: list[str]) -> dict:
    """One evaluation's per-task outcomes by split and condition, for differences paired task by task."""
    return {split: {cond: ev[split][cond]["won_by_task"] for cond in ("plain", "with_bank")
                    if cond in ev[split] and "won_by_task" in ev[split][cond]} for split in splits}


def read_run(folder: Path, splits: list[str]) -> dict:
    """The curve (success against environment steps) and the final evaluation of one run folder."""
    steps = 0
    curve, bank_rounds = [], []
    params = json.loads((folder / "params.json").read_text())
    episodes = params["rollout"]["tasks_per_round"] * params["rollout"]["group_size"]
    base = json.loads((folder / "eval_base.json").read_text())
    points = [(-1, 0, base)]
    for round_dir in sorted(folder.glob("round_[0-9][0-9][0-9]")):
        metrics = json.loads((round_dir / "train_metrics.json").read_text())
        # Runs from before train_env_steps was recorded: mean length x episodes is the same number.
        steps += metrics.get("train_env_steps", round(metrics["train_episode_length"] * episodes))
        if (round_dir / "eval.json").exists():
            ev = json.loads((round_dir / "eval.json").read_text())
            points.append((ev["round"], steps, ev))
        if params["train"]["method"] != "grpo":
            scores = json.loads((round_dir / "scores.json").read_text())
            contribution, groups = scores["summary"], scores["groups"]
            # Success of the plain and the conditioned members of the groups that retrieved (the split ones).
            record = {"round": int(round_dir.name[-3:]), "hit_rate": contribution["retrieval_hit_rate"],
                      "delta_mean": contribution["delta_mean"],
                      "delta_positive_share": contribution["delta_positive_share"],
                      "train_success_plain": fmean(g["success_plain"] for g in groups) if groups else None,
                      "train_success_conditioned": fmean(g["success_conditioned"] for g in groups) if groups else None,
                      "distill_kl": metrics.get("distill_kl", 0.0),
                      "advice_shift_kl": metrics.get("advice_shift_kl"),
                      # Recorded by runs with distill.anchor / distill.extra_epochs only.
                      "anchor_kl": metrics.get("anchor_kl"), "distill_extra_kl": metrics.get("distill_extra_kl"),
                      "distill_extra_steps": metrics.get("distill_extra_steps", 0),
                      "distill_samples": metrics.get("distill_samples", 0), "samples": metrics.get("samples", 0)}
            if (round_dir / "bank_changes.json").exists():
                changes = json.loads((round_dir / "bank_changes.json").read_text())
                record |= {"size_active": changes["size_active"], "added": len(changes["added"]),
                           "pruned": len(changes["pruned"])}
            bank_rounds.append(record)
    for k, at_steps, ev in points:
        curve.append({"round": k, "env_steps": at_steps} | evaluation_row(ev, splits))
    # The run's own account of its time in `edge train`, summed over resumed invocations.
    timing = folder / "wall_time.json"
    seconds = json.loads(timing.read_text())["seconds"] if timing.exists() else None
    # The last evaluation's per-task outcomes, for differences paired task by task within a seed.
    final_tasks = task_outcomes(points[-1][2], splits)
    base_tasks = {split: base[split]["plain"].get("won_by_task") for split in splits}
    return {"folder": str(folder), "curve": curve, "final": curve[-1], "env_steps": steps, "run_seconds": seconds,
            "bank_rounds": bank_rounds, "final_tasks": final_tasks, "base_tasks": base_tasks}


def bank_activity(runs: dict) -> dict | None:
    """How much the bank took part in training, over a method's seeds and rounds: the share of groups
    that retrieved anything, Delta on those groups, the bank's final size, the states distilled."""
    rounds = [r for run in runs.values() for r in run.get("bank_rounds", [])]
    if not rounds:
        return None
    hits = sum(r["hit_rate"] for r in rounds)
    return {
        "hit_rate": fmean([r["hit_rate"] for r in rounds]),
        # Weighted by how many groups retrieved, so rounds where one group did count less.
        "delta_mean": sum(r["delta_mean"] * r["hit_rate"] for r in rounds) / hits if hits else None,
        "delta_positive_share": sum(r["delta_positive_share"] * r["hit_rate"] for r in rounds) / hits if hits else None,
        # None for the oracle control, which keeps no bank.
        "final_size_active": fmean([run["bank_rounds"][-1]["size_active"] for run in runs.values()])
        if "size_active" in rounds[-1] else None,
        "added_per_round": fmean([r["added"] for r in rounds]) if "added" in rounds[-1] else None,
        "pruned_per_round": fmean([r["pruned"] for r in rounds]) if "pruned" in rounds[-1] else None,
        "distilled_share": sum(r["distill_samples"] for r in rounds) / max(1, sum(r["samples"] for r in rounds)),
    }


def paired_difference(ours: list[float], theirs: list[float], seeds: list[int],
                      tasks: list[tuple[dict, dict]] | None = None) -> dict:
    """Mean of ``ours - theirs`` over paired seeds, its Student-t interval and exact permutation p-value.
    With ``tasks`` (per seed, the two evaluations' outcomes by task id), also each seed's difference
    paired task by task with its interval (``per_seed_tasks``: evaluation noise only)."""
    diffs = [a - b for a, b in zip(ours, theirs)]
    out = t_interval_mean(diffs).to_dict() | {
        "p_value": paired_permutation_p(ours, theirs),
        "smallest_possible_p": smallest_p(sum(d != 0 for d in diffs)),
        "per_seed": {str(s): d for s, d in zip(seeds, diffs)}}
    if tasks and all(a and b for a, b in tasks):
        out["per_seed_tasks"] = {str(s): paired_task_difference(a, b).to_dict() for s, (a, b) in zip(seeds, tasks)}
    return out


def summarise(results: dict, cfg: LearningBenchConfig) -> dict:
    """Bootstrap intervals per (env, method, split) and paired differences against GRPO."""
    table: dict = {}
    for env, by_method in results.items():
        table[env] = {}
        baseline = by_method.get(BASELINE, {})
        for method, by_seed in by_method.items():
            table[env][method] = {}
            for split in cfg.splits:
                def final(runs: dict, seed: int, metric: str, split=split):
                    return runs[seed]["final"].get(f"{split}_{metric}")

                def outcomes(runs: dict, seed: int, condition: str, split=split) -> dict | None:
                    return runs[seed].get("final_tasks", {}).get(split, {}).get(condition)

                entry = {}
                for metric in ("plain", "with_bank", "retention", "plain_score", "with_bank_score"):
                    values = [v for s in by_seed if (v := final(by_seed, s, metric)) is not None]
                    if values:
                        entry[metric] = bootstrap_mean(values).to_dict()
                own = sorted(by_seed)
                # The gain over each seed's own base: the same tasks, paired by task within the seed.
                entry["plain_minus_base"] = paired_difference(
                    [final(by_seed, s, "plain") for s in own],
                    [by_seed[s]["curve"][0][f"{split}_plain"] for s in own], own,
                    [(outcomes(by_seed, s, "plain"), by_seed[s].get("base_tasks", {}).get(split)) for s in own])
                banked_own = [final(by_seed, s, "with_bank") for s in own]
                if own and None not in banked_own:
                    # The same tasks and streams with and without the bank: paired by task in each seed.
                    entry["with_bank_minus_plain"] = paired_difference(
                        banked_own, [final(by_seed, s, "plain") for s in own], own,
                        [(outcomes(by_seed, s, "with_bank"), outcomes(by_seed, s, "plain")) for s in own])
                seeds = sorted(set(by_seed) & set(baseline))
                if method != BASELINE and seeds:
                    grpo_plain = [final(baseline, s, "plain") for s in seeds]
                    grpo_tasks = [outcomes(baseline, s, "plain") for s in seeds]
                    entry["minus_grpo"] = paired_difference(
                        [final(by_seed, s, "plain") for s in seeds], grpo_plain, seeds,
                        list(zip([outcomes(by_seed, s, "plain") for s in seeds], grpo_tasks)))
                    banked = [final(by_seed, s, "with_bank") for s in seeds]
                    if None not in banked:
                        entry["scaffold_minus_grpo_plain"] = paired_difference(
                            banked, grpo_plain, seeds,
                            list(zip([outcomes(by_seed, s, "with_bank") for s in seeds], grpo_tasks)))
                    entry["score_minus_grpo"] = paired_difference(
                        [final(by_seed, s, "plain_score") for s in seeds],
                        [final(baseline, s, "plain_score") for s in seeds], seeds)
                table[env][method][split] = entry
    return table


def _fmt(e: dict | None, points: bool = False) -> str:
    if not e:
        return "–"
    scale, unit = (100, "") if points else (100, "%")
    sign = "+" if points and e["mean"] > 0 else ""
    return f"{sign}{e['mean'] * scale:.1f}{unit} [{e['low'] * scale:.1f}, {e['high'] * scale:.1f}]"


def signed_points(e: dict) -> str:
    """A difference of shares in points with its interval, every figure signed: ``+2.7 [+0.8, +4.6]``."""
    return f"{100 * e['mean']:+.1f} [{100 * e['low']:+.1f}, {100 * e['high']:+.1f}]"


def _diff_cells(e: dict | None) -> str:
    return f"{_fmt(e, True)} | {e['p_value']:.3f}" if e else "– | –"


def _num(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _seed_cell(seed: str, value: float, tasks: dict | None) -> str:
    interval = f" [{tasks['low'] * 100:+.1f}, {tasks['high'] * 100:+.1f}]" if tasks else ""
    return f"s{seed} {value * 100:+.1f}{interval}"


def scaffold_record(report: dict, env: str) -> list[str]:
    """Per method with experience and per seed: training groups' plain / conditioned success and the
    distillation KL, round by round (does the plain policy catch up with the scaffold?)."""
    lines = []
    for method, by_seed in report["runs"][env].items():
        if not any(r.get("bank_rounds") for r in by_seed.values()):
            continue
        rounds = max(len(r["bank_rounds"]) for r in by_seed.values())
        lines += [f"### {env} / {method}: the scaffold round by round", "",
                  "Training groups that retrieved: plain members' success / conditioned members' success "
                  "(distillation KL per distilled state after the update).", "",
                  "| seed | " + " | ".join(f"r{k}" for k in range(rounds)) + " |",
                  "|---|" + "---|" * rounds]
        for seed, run in by_seed.items():
            cells = {r["round"]: (f"{r['train_success_plain']:.0%} / {r['train_success_conditioned']:.0%} "
                                  f"({r['distill_kl']:.3f})" if r["train_success_conditioned"] is not None else "–")
                     for r in run["bank_rounds"]}
            lines.append(f"| {seed} | " + " | ".join(cells.get(k, "–") for k in range(rounds)) + " |")
        lines.append("")
    return lines


def base_spread(report: dict, env: str, split: str) -> list[str]:
    """How much of the spread over seeds is the warm start's: each seed's base, and per method the
    standard deviation over seeds of the final success and of the gain over the seed's base, and the
    correlation of base and final (with five seeds a rough guide, not a test)."""
    by_method = report["runs"][env]
    seeds = sorted(next(iter(by_method.values())))
    base = {s: next(iter(by_method.values()))[s]["curve"][0][f"{split}_plain"] for s in seeds}
    if len(seeds) < 2:
        return []

    def corr(xs, ys):
        try:
            return correlation(xs, ys)
        except StatisticsError:  # a constant series: no correlation
            return None

    lines = ["The warm start's part in the spread: base success per seed " + ", ".join(
        f"s{s} {base[s]:.1%}" for s in seeds) + f" (sd {100 * stdev(base.values()):.1f} points).", "",
        "| method | sd of final over seeds (points) | sd of final − base (points) | corr(base, final) |",
        "|---|---|---|---|"]
    for method, by_seed in by_method.items():
        final = [by_seed[s]["final"][f"{split}_plain"] for s in seeds if s in by_seed]
        bases = [base[s] for s in seeds if s in by_seed]
        if len(final) < 2:
            continue
        r = corr(bases, final)
        gain_sd = stdev(f - b for f, b in zip(final, bases))
        lines.append(f"| {method} | {100 * stdev(final):.1f} | {100 * gain_sd:.1f} | "
                     + ("–" if r is None else f"{r:+.2f}") + " |")
    return lines + [""]


def markdown(report: dict) -> str:
    cfg = report["config"]
    n_seeds = len(cfg["seeds"])
    lines = [f"# Learning benchmark ({cfg['name']})", "",
             f"{n_seeds} seeds ({', '.join(map(str, cfg['seeds']))}), paired by seed; {report['rounds']} rounds "
             f"of the default round size; {cfg['eval_episodes']} evaluation episodes per split and condition. "
             "Mean over seeds with a 95% percentile-bootstrap interval (with few seeds it is too narrow: it "
             "cannot be wider than the seeds' range); differences (against GRPO, against the seed's base, with the "
             "bank against without) are paired by seed, in points, "
             "with a 95% Student-t interval and an exact sign-flip permutation p-value (the smallest possible "
             f"with {n_seeds} seeds is {smallest_p(n_seeds):.4f}, larger where a seed's difference is exactly "
             "zero). Success is reward 1; score is the mean reward "
             "x 100 (WebShop's \"Score\"; equal to success x 100 where rewards are 0 or 1).", "",
             f"Command: `{report['command']}`  ",
             f"Machine: {report['machine']}; " + (
                 f"the last invocation of the benchmark took {report['wall_minutes']:.0f} min of wall time with "
                 f"{cfg['jobs']} runs in parallel"
                 if report["wall_minutes"] is not None else "tables rebuilt from finished runs (--report-only)")
             + run_time_sentence(report), ""]
    for env, by_method in report["table"].items():
        for split in cfg["splits"]:
            lines += [f"## {env} / {split}", "",
                      "| method | plain success | plain − base (points) | with bank | retention | "
                      "with bank − plain (points) | plain − GRPO (points) | p | "
                      "with bank − GRPO plain (points) | p | plain score | with-bank score | "
                      "score − GRPO (points) | p | env steps |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for method, splits in by_method.items():
                e = splits[split]
                steps = [r["env_steps"] for r in report["runs"][env][method].values()]
                lines.append(f"| {method} | {_fmt(e.get('plain'))} | {_fmt(e.get('plain_minus_base'), True)} | "
                             f"{_fmt(e.get('with_bank'))} | "
                             f"{_fmt(e.get('retention'))} | {_fmt(e.get('with_bank_minus_plain'), True)} | "
                             f"{_diff_cells(e.get('minus_grpo'))} | "
                             f"{_diff_cells(e.get('scaffold_minus_grpo_plain'))} | "
                             f"{_fmt(e.get('plain_score'), True).lstrip('+')} | "
                             f"{_fmt(e.get('with_bank_score'), True).lstrip('+')} | "
                             f"{_diff_cells(e.get('score_minus_grpo'))} | {sum(steps) / len(steps):,.0f} |")
            lines.append("")
            lines += base_spread(report, env, split)
            for key, title in (("plain_minus_base", "plain − the seed's base"), ("minus_grpo", "plain − GRPO plain"),
                               ("with_bank_minus_plain", "with bank − plain")):
                per_seed = {m: s[split][key] for m, s in by_method.items() if key in s[split]}
                if per_seed:
                    lines.append(f"Per seed, {title} (points; in brackets the 95% interval of the difference "
                                 "paired task by task within the seed, evaluation noise only): " + "; ".join(
                                     f"{m}: " + ", ".join(_seed_cell(k, v, d.get("per_seed_tasks", {}).get(k))
                                                          for k, v in d["per_seed"].items())
                                     for m, d in per_seed.items()))
                    lines.append("")
        activity = report["bank_activity"].get(env)
        if activity:
            lines += [f"## {env}: the bank during training", "",
                      "Over seeds and rounds. Groups retrieving: share of training groups whose task retrieved any "
                      "entry (the others are plain GRPO groups). Delta: conditioned minus plain mean reward inside "
                      "those groups (success where rewards are 0 or 1). Distilled: share of update samples that carry "
                      "the distillation term.", "",
                      "| method | groups retrieving | mean Delta | Delta > 0 | entries added / round | "
                      "pruned / round | active at the end | distilled |", "|---|---|---|---|---|---|---|---|"]
            for method, a in activity.items():
                delta = "–" if a["delta_mean"] is None else f"{a['delta_mean']:+.3f}"
                positive = "–" if a["delta_positive_share"] is None else f"{a['delta_positive_share']:.0%}"
                lines.append(f"| {method} | {a['hit_rate']:.0%} | {delta} | {positive} | "
                             f"{_num(a['added_per_round'], 1)} | {_num(a['pruned_per_round'], 1)} | "
                             f"{_num(a['final_size_active'], 0)} | {a['distilled_share']:.0%} |")
            lines.append("")
        lines += scaffold_record(report, env)
    return "\n".join(lines) + "\n"


def run_minutes(report: dict) -> dict[str, float | None]:
    """Per environment, the runs' own wall times summed over every invocation (None if a run has none)."""
    out = {}
    for env, by_method in report["runs"].items():
        seconds = [r.get("run_seconds") for by_seed in by_method.values() for r in by_seed.values()]
        out[env] = None if None in seconds else sum(seconds) / 60
    return out


def run_time_sentence(report: dict) -> str:
    minutes = run_minutes(report)
    if None in minutes.values():
        return "."
    total = sum(minutes.values())
    parts = ", ".join(f"{env} {m:.0f}" for env, m in minutes.items())
    jobs = report["config"]["jobs"]
    return (f"; the runs took {total:.0f} min in all ({parts}; each run's own clock, summed over resumed "
            f"invocations): {total / jobs:.0f} min of wall time at {jobs} runs in parallel if the runs had been "
            "made in one sitting.")


def mean_curve(runs: list[dict], split: str, metric: str) -> list[tuple[float, float, float | None]]:
    """(mean environment steps, mean plain, mean with bank or None) per evaluation point, over seeds;
    ``metric`` is "" for success or "_score" for the score."""
    points = []
    for i in range(min(len(r["curve"]) for r in runs)):
        rows = [r["curve"][i] for r in runs]
        banked = [row.get(f"{split}_with_bank{metric}") for row in rows]
        points.append((sum(row["env_steps"] for row in rows) / len(rows),
                       sum(row[f"{split}_plain{metric}"] for row in rows) / len(rows),
                       sum(banked) / len(banked) if None not in banked else None))
    return points


def curve_plots(report: dict, out_dir: Path) -> list[Path]:
    """Success and score against environment steps, mean over seeds, one figure per (env, split)."""
    from edge.plots import curves_plot

    paths = []
    for env, by_method in report["runs"].items():
        for split in report["config"]["splits"]:
            for metric, label in (("", "success"), ("_score", "score")):
                curves = {method: mean_curve(list(by_seed.values()), split, metric)
                          for method, by_seed in by_method.items()}
                name = f"{report['config']['name']}_{env}_{split}{metric}.png"
                paths.append(curves_plot(curves, out_dir / name, f"{env} / {split}: {label}",
                                         xlabel="environment steps", ylabel=label))
    return paths


def log_to_mlflow(report: dict, files: list[Path]) -> None:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    from edge.tracking import experiment_id, tracking_uri

    mlflow.set_tracking_uri(tracking_uri())
    name = "bench-learning"
    experiment_id(mlflow.tracking.MlflowClient(), name, "The learning benchmark's tables and plots, a run per report.")
    mlflow.set_experiment(name)
    with mlflow.start_run(run_name=report["config"]["name"]):
        mlflow.log_params({k: str(v) for k, v in report["config"].items()})
        for env, by_method in report["table"].items():
            for method, splits in by_method.items():
                for split, e in splits.items():
                    for metric, est in e.items():
                        mlflow.log_metric(f"{env}.{method}.{split}.{metric}", est["mean"])
        for env, by_method in report["bank_activity"].items():
            for method, activity in by_method.items():
                for metric, value in activity.items():
                    if value is not None:
                        mlflow.log_metric(f"{env}.{method}.bank_activity.{metric}", value)
        for path in files:
            mlflow.log_artifact(str(path))


def previous_wall_minutes(cfg: LearningBenchConfig) -> float | None:
    """With --report-only, the wall time of the invocation that trained these same runs, if its report
    is still there (else None: the tables say they were rebuilt)."""
    path = cfg.out_dir / f"{cfg.name}.json"
    if not path.exists():
        return None
    before = json.loads(path.read_text())
    same = all(before["config"].get(k) == getattr(cfg, k) for k in ("envs", "methods", "seeds", "eval_episodes"))
    return before.get("wall_minutes") if same else None


def warm_starts(cfg: LearningBenchConfig, launcher=None) -> dict[tuple[str, int], Path]:
    """The base checkpoint of every (env, seed), built where missing: one after another on this machine
    with the output on the console (``jobs`` 1), ``jobs`` at a time on this machine, or as tasks of
    ``launcher``'s cluster (both with the output in ``<runs_dir>/logs``)."""
    keys = [(env, seed) for env in cfg.envs for seed in cfg.seeds]
    if launcher is None and cfg.jobs <= 1:
        return {key: base_checkpoint(cfg, *key) for key in keys}
    distinct = list({base_folder(cfg, *key): key for key in keys}.values())  # seeds sharing a warm start: once
    # Each warm start is its own process, as each training run is: built one after another, five of them
    # kept one of two cores idle for about 20 minutes before the first run could start.
    launch = launcher or run_locally
    built = in_parallel(lambda key: base_checkpoint(cfg, *key, launch=launch), distinct, cfg.jobs,
                        launcher.cancel_running if launcher else None)
    by_folder = dict(zip((base_folder(cfg, *key) for key in distinct), built))
    return {key: by_folder[base_folder(cfg, *key)] for key in keys}


def in_parallel(work: Callable, items: list, jobs: int, on_interrupt: Callable[[], None] | None = None) -> list:
    """``work(item)`` for every item, ``jobs`` at a time; the results in order. After a failure nothing
    new starts and those running end, then the first failure in order is raised. On Ctrl-C,
    ``on_interrupt`` stops what runs where Ctrl-C does not reach (a cluster)."""
    failed = threading.Event()

    def guarded(item):
        if failed.is_set():
            return None
        try:
            return work(item)
        except BaseException:
            failed.set()
            raise

    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        return list(pool.map(guarded, items))
    except BaseException as err:
        failed.set()
        if isinstance(err, KeyboardInterrupt) and on_interrupt is not None:
            on_interrupt()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_benchmark(cfg: LearningBenchConfig, command: str = "edge bench learning", track: bool = True,
                  progress=None) -> dict:
    """Train every (env, method, seed) not already finished, then write the tables and plots."""
    unknown = sorted(set(cfg.methods) - set(METHODS))
    if unknown:
        raise ValueError(f"methods {unknown} are unknown; valid methods: {', '.join(METHODS)}")
    started = time.perf_counter()
    rounds = rounds_for(cfg)
    launcher = None
    machine = describe_machine()
    if cfg.ray and not cfg.report_only:
        from edge.benchmarking.on_ray import RayLauncher

        launcher = RayLauncher(cfg.ray, cpus=cfg.ray_cpus, gpus=cfg.ray_gpus)
        machine = f"{launcher.describe()}; driver {machine}"
    if cfg.jobs < 0:
        raise ValueError(f"jobs must be 0 (as many as there are cores) or more, got {cfg.jobs}")
    if cfg.jobs == 0:
        cfg = replace(cfg, jobs=launcher.capacity() if launcher else os.cpu_count() or 1)
    bases = {} if cfg.report_only else warm_starts(cfg, launcher)
    jobs = [(env, method, seed) for env in cfg.envs for seed in cfg.seeds for method in cfg.methods]
    log_dir = cfg.runs_dir / "logs"
    bar = progress.add_task("benchmark runs", total=len(jobs)) if progress else None

    def work(job):
        env, method, seed = job
        if cfg.report_only:
            folder = cfg.runs_dir / run_name(env, method, seed)
            if not (folder / round_dir_name(rounds - 1) / "eval.json").exists():
                raise ValueError(f"--report-only: {folder} has not finished {rounds} rounds")
        else:
            folder = train_one(cfg, env, method, seed, bases[env, seed], rounds, log_dir,
                               launch=launcher or run_locally)
        if progress:
            progress.advance(bar)
        return folder

    # On a failed run or Ctrl-C no further run starts; those running end (Ctrl-C reaches them too, on a
    # cluster the launcher stops them) and a rerun of the same command resumes from the finished ones.
    folders = in_parallel(work, jobs, cfg.jobs, launcher.cancel_running if launcher else None)
    wall_minutes = previous_wall_minutes(cfg) if cfg.report_only else (time.perf_counter() - started) / 60
    return write_report(cfg, dict(zip(jobs, folders)), rounds, command, machine, wall_minutes, track)


def write_report(cfg: LearningBenchConfig, folders: dict[tuple[str, str, int], Path], rounds: int, command: str,
                 machine: str, wall_minutes: float | None, track: bool = True) -> dict:
    """Read the finished runs (``folders`` by (env, method, seed)) and write the tables, the JSON and the
    curves to ``out_dir`` (and MLflow with ``track``); returns the report."""
    results: dict = {env: {m: {} for m in cfg.methods} for env in cfg.envs}
    for env in cfg.envs:
        for seed in cfg.seeds:
            for method in cfg.methods:
                results[env][method][seed] = read_run(folders[env, method, seed], cfg.splits)
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "rounds": rounds, "command": command,
        "machine": machine,
        "wall_minutes": wall_minutes,
        "table": summarise(results, cfg),
        "bank_activity": {env: {m: a for m, by_seed in by_method.items() if (a := bank_activity(by_seed))}
                          for env, by_method in results.items()},
        "runs": {env: {m: {str(s): r for s, r in by_seed.items()} for m, by_seed in by_method.items()}
                 for env, by_method in results.items()},
    }
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = cfg.out_dir / f"{cfg.name}.json"
    md_path = cfg.out_dir / f"{cfg.name}.md"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    md_path.write_text(markdown(report))
    files = [json_path, md_path, *curve_plots(report, cfg.out_dir)]
    if track:
        log_to_mlflow(report, files)
    return report
