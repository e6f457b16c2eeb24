"""Training runs as rounds of stages, each writing its outputs atomically into the run folder.

    runs/<run>/round_<k>/rollouts.parquet     collect: G trajectories for each of N train tasks
                        /train_metrics.json   update: losses, success, timings
                        /checkpoint/          update: model (save_pretrained) + trainer_state.pt
                        /eval.json            evaluate: held-out success (with / without bank)

A stage is complete when its output exists, so re-running a run skips finished work and resumes at
the first missing output. Randomness is derived from (seed, round, stage), so a resumed run draws
exactly what an uninterrupted one would. The functions here are what the CLI, the Prefect flow and
DVC call; they take plain values and paths.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from edge.algorithms.grpo import UpdateConfig, grpo_samples, policy_update
from edge.config import EdgeParams
from edge.envs.base import Task
from edge.envs.registry import generate_tasks
from edge.evaluate import evaluate
from edge.policy.actor import Actor
from edge.policy.model import Policy, load_policy, save_policy
from edge.rollout import read_rollouts, rollout, write_rollouts

STAGE_SALT = {"collect": 1, "update": 2, "evaluate": 3}


def stage_seed(seed: int, round_index: int, stage: str) -> int:
    return (seed * 1_000_003 + round_index * 101 + STAGE_SALT[stage]) % (2**63)


def write_json(path: Path, data) -> None:
    """Atomic: write a temporary file, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Run:
    """A run folder plus what is loaded in memory (the policy of the last completed round)."""

    params: EdgeParams
    folder: Path
    _policy: Policy | None = None
    _policy_round: int | None = None
    _optimizer: torch.optim.Optimizer | None = None
    timings: dict = field(default_factory=dict)

    @classmethod
    def open(cls, params: EdgeParams) -> Run:
        cfg = params.train
        name = cfg.run_name or f"{cfg.env}-{cfg.method}-s{params.seed}"
        folder = Path(cfg.runs_dir) / name
        folder.mkdir(parents=True, exist_ok=True)
        saved = folder / "params.json"
        current = params.model_dump(mode="json")
        if saved.exists():
            previous = json.loads(saved.read_text())
            if previous != current:
                changed = sorted(k for k in current if previous.get(k) != current[k])
                raise ValueError(f"run folder {folder} was started with different parameters (sections "
                                 f"{changed}); use another train.run_name or delete the folder")
        else:
            write_json(saved, current)
        return cls(params, folder)

    def round_dir(self, k: int) -> Path:
        return self.folder / f"round_{k:03d}"

    def checkpoint(self, k: int) -> Path | None:
        """Checkpoint that round ``k`` starts from: round k-1's, or the base for round 0."""
        if k == 0:
            base = self.params.train.base_checkpoint
            return Path(base) if base else None
        return self.round_dir(k - 1) / "checkpoint"

    def policy_for(self, k: int) -> tuple[Policy, torch.optim.Optimizer]:
        """The policy (and its optimizer) as of the start of round ``k``, loaded once."""
        if self._policy is None or self._policy_round != k:
            path = self.checkpoint(k)
            if path is not None and not path.exists():
                raise FileNotFoundError(f"checkpoint {path} is missing: run `edge warmup` first "
                                        "(or set train.base_checkpoint: null)")
            policy = load_policy(self.params.policy, checkpoint=path, seed=self.params.seed,
                                 envs=[self.params.train.env])
            g = self.params.grpo
            optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad],
                                          lr=g.lr, weight_decay=g.weight_decay)
            state_file = path / "trainer_state.pt" if path else None
            if k > 0 and state_file and state_file.exists():
                state = torch.load(state_file, weights_only=False)
                optimizer.load_state_dict(state["optimizer"])
            self._policy, self._optimizer, self._policy_round = policy, optimizer, k
        return self._policy, self._optimizer

    def round_tasks(self, k: int) -> list[Task]:
        cfg = self.params
        pool = generate_tasks(cfg.train.env, "train", cfg.data.train_tasks, cfg.seed)
        rng = random.Random(stage_seed(cfg.seed, k, "collect"))
        return rng.sample(pool, min(cfg.rollout.tasks_per_round, len(pool)))

    def eval_tasks(self, split: str) -> list[Task]:
        # The same tasks for every round and method: comparisons are paired.
        return generate_tasks(self.params.train.env, split, self.params.eval.episodes, self.params.seed)


# ----- stages --------------------------------------------------------------------------------
def collect_stage(run: Run, k: int, progress=None) -> Path:
    out = run.round_dir(k) / "rollouts.parquet"
    if out.exists():
        return out
    started = time.perf_counter()
    policy, _ = run.policy_for(k)
    cfg = run.params.rollout
    tasks = run.round_tasks(k)
    generator = torch.Generator().manual_seed(stage_seed(run.params.seed, k, "collect"))
    trajectories = rollout(Actor(policy), tasks, cfg.group_size, generator, max_steps=cfg.max_steps,
                           progress=progress)
    write_rollouts(trajectories, out)
    run.timings[(k, "collect")] = time.perf_counter() - started
    return out


def update_stage(run: Run, k: int) -> Path:
    out = run.round_dir(k) / "checkpoint"
    metrics_file = run.round_dir(k) / "train_metrics.json"
    if out.exists() and metrics_file.exists():
        return out
    started = time.perf_counter()
    policy, optimizer = run.policy_for(k)
    trajectories = read_rollouts(run.round_dir(k) / "rollouts.parquet")
    g = run.params.grpo
    samples, group_stats = grpo_samples(trajectories, g.std_normalize)
    update_cfg = UpdateConfig(g.lr, g.epochs, g.minibatch_size, g.clip_low, g.clip_high, g.beta, g.loss_agg,
                              g.max_grad_norm)
    generator = torch.Generator().manual_seed(stage_seed(run.params.seed, k, "update"))
    losses = policy_update(Actor(policy), optimizer, samples, update_cfg, generator) if samples else {}
    # Save to a temporary folder, then rename: a half-written checkpoint is never taken for a whole one.
    tmp = out.with_name("checkpoint.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_policy(policy, tmp)
    torch.save({"optimizer": optimizer.state_dict(), "round": k,
                "torch_rng": torch.get_rng_state(), "python_rng": random.getstate()}, tmp / "trainer_state.pt")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    run._policy_round = k + 1  # the in-memory policy is now round k+1's starting point
    plain = [t for t in trajectories if not t.conditioned]
    metrics = {
        "round": k,
        "train_success_plain": sum(t.won for t in plain) / max(len(plain), 1),
        "train_reward": sum(t.reward for t in trajectories) / len(trajectories),
        "train_episode_length": sum(len(t.steps) for t in trajectories) / len(trajectories),
        "samples": len(samples),
        "tokens": sum(len(s.prompt_ids) + sum(len(c) for c in (s.candidate_ids or [])) + len(s.response_ids or [])
                      for s in samples) * g.epochs,
        **group_stats, **losses,
        "update_seconds": time.perf_counter() - started,
        "collect_seconds": run.timings.get((k, "collect")),
        "peak_memory_mb": peak_memory_mb(),
    }
    write_json(metrics_file, metrics)
    return out


def evaluate_stage(run: Run, k: int, force: bool = False, progress=None) -> Path | None:
    cfg = run.params.eval
    last = k == run.params.train.rounds - 1
    out = run.round_dir(k) / "eval.json"
    if out.exists() or not (force or last or (k + 1) % cfg.every == 0):
        return out if out.exists() else None
    started = time.perf_counter()
    policy, _ = run.policy_for(k + 1)
    actor = Actor(policy)
    result = {"round": k}
    for split in cfg.splits:
        seed = stage_seed(run.params.seed, k, "evaluate")
        result[split] = {"plain": evaluate(actor, run.eval_tasks(split), seed, greedy=cfg.greedy,
                                           progress=progress).to_dict()}
    result["eval_seconds"] = time.perf_counter() - started
    write_json(out, result)
    return out


def baseline_eval(run: Run, progress=None) -> Path:
    """Evaluate the starting checkpoint once (round -1), so curves start at the base."""
    out = run.folder / "eval_base.json"
    if out.exists():
        return out
    policy, _ = run.policy_for(0)
    actor = Actor(policy)
    result = {"round": -1}
    for split in run.params.eval.splits:
        seed = stage_seed(run.params.seed, -1, "evaluate")
        result[split] = {"plain": evaluate(actor, run.eval_tasks(split), seed, greedy=run.params.eval.greedy,
                                           progress=progress).to_dict()}
    write_json(out, result)
    return out


def round_summary(run: Run, k: int) -> dict:
    summary = json.loads((run.round_dir(k) / "train_metrics.json").read_text())
    eval_file = run.round_dir(k) / "eval.json"
    if eval_file.exists():
        ev = json.loads(eval_file.read_text())
        for split in run.params.eval.splits:
            summary[f"eval_{split}_plain"] = ev[split]["plain"]["success"]
    return summary


def train(params: EdgeParams, on_round=None, progress=None) -> Run:
    """Run (or resume) every round of ``params.train``; ``on_round(k, summary)`` after each."""
    if params.train.method != "grpo":
        raise NotImplementedError(f"train.method {params.train.method!r} lands with the EDGE issue; use grpo")
    torch.manual_seed(params.seed)
    run = Run.open(params)
    baseline_eval(run, progress)
    for k in range(params.train.rounds):
        collect_stage(run, k, progress)
        update_stage(run, k)
        evaluate_stage(run, k, progress=progress)
        if on_round:
            on_round(k, round_summary(run, k))
    return run
