"""The ``prepare`` stage: task files for every environment and split, from one seed."""

from __future__ import annotations

from pathlib import Path

from edge.config import DataConfig
from edge.envs.base import write_tasks
from edge.envs.registry import env_splits, generate_tasks


def task_path(out_dir: Path, env: str, split: str) -> Path:
    return Path(out_dir) / env / f"{split}.jsonl"


def prepare_tasks(cfg: DataConfig, seed: int) -> dict[str, dict[str, int]]:
    """Write ``<out_dir>/<env>/<split>.jsonl`` for every configured environment and each split it has;
    return the counts."""
    counts: dict[str, dict[str, int]] = {}
    for env in cfg.envs:
        counts[env] = {}
        for split in env_splits(env):
            tasks = generate_tasks(env, split, cfg.count(split), seed)
            counts[env][split] = write_tasks(tasks, task_path(cfg.out_dir, env, split))
    return counts

