"""What is in a runs folder: each training run's identity, progress and last numbers (``edge runs ls``).

Read from the files the stages write, never from a process: a run is where its outputs say it is, so
a killed run shows the stage it will resume at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RunStatus:
    name: str
    env: str
    method: str
    seed: int
    rounds_done: int
    """Rounds whose update finished (checkpoint and metrics written)."""
    rounds_planned: int
    state: str
    """``finished`` (every round and the run's summary written), ``stopped in round k before <stage>``
    (what the same command resumes at), or ``not started``."""
    plain: float | None
    with_bank: float | None
    base_plain: float | None
    last_evaluated_round: int | None
    wall_seconds: float | None


def round_stages(stores_bank: bool) -> list[tuple[str, str]]:
    """(stage, the file that marks it done) in a round's order; evaluation only runs on some rounds."""
    stages = [("collect", "rollouts.parquet"), ("score", "scores.json")]
    if stores_bank:
        stages.append(("update_bank", "bank_changes.json"))
    return stages + [("distill", "train_metrics.json")]


def run_status(folder: Path) -> RunStatus:
    """The status of one run folder (it must hold the ``params.json`` a run writes first)."""
    from edge.config import EdgeParams, method_settings

    folder = Path(folder)
    saved = folder / "params.json"
    if not saved.exists():
        raise ValueError(f"{folder} is not a training run folder (no params.json)")
    params = EdgeParams.model_validate(json.loads(saved.read_text()))
    planned = params.train.rounds
    stages = round_stages(method_settings(params).stores_bank)
    done, state = 0, "not started"
    for k in range(planned):
        round_dir = folder / f"round_{k:03d}"
        missing = next((stage for stage, marker in stages if not (round_dir / marker).exists()), None)
        if missing is not None:
            if k > 0 or (round_dir / "rollouts.parquet").exists() or (folder / "eval_base.json").exists():
                state = f"stopped in round {k} before {missing}"
            break
        done = k + 1
    metrics_file = folder / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    if done == planned and metrics.get("rounds") == planned:
        state = "finished"
    elif done == planned:
        state = f"stopped after round {done - 1} (summary not written)"
    split = params.eval.splits[0]
    wall = folder / "wall_time.json"
    return RunStatus(folder.name, params.train.env, params.train.method, params.seed, done, planned, state,
                     metrics.get(f"{split}_plain"), metrics.get(f"{split}_with_bank"),
                     metrics.get(f"{split}_base_plain"), metrics.get("last_evaluated_round"),
                     json.loads(wall.read_text())["seconds"] if wall.exists() else None)


def list_runs(runs_dir: Path) -> list[RunStatus]:
    """Every run folder directly under ``runs_dir``, by name."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise ValueError(f"{runs_dir} is not a folder (train.runs_dir, where `edge train` writes runs)")
    return [run_status(f) for f in sorted(runs_dir.iterdir()) if (f / "params.json").exists()]
