"""What is in a runs folder: each training run's identity, progress and last numbers (``edge runs ls``).

Read from the files the stages write, never from a process: a run is where its outputs say it is, so
a killed run shows the stage it will resume at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edge.config import EdgeParams, method_settings, run_params
from edge.files import is_sealed, read_json


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


def round_stages(stores_bank: bool) -> list[str]:
    """The stages every round seals, in order (evaluation only runs on some rounds)."""
    return ["collect", "score", *(["update_bank"] if stores_bank else []), "distill"]


def read_run_params(folder: Path) -> EdgeParams:
    """The parameters a run folder's ``params.json`` records, read as the run ran them (``config.run_params``:
    fields added since take their defaults, or the old behaviour where that differs)."""
    saved = Path(folder) / "params.json"
    if not saved.exists():
        raise ValueError(f"{folder} is not a training run folder (no params.json)")
    return run_params(read_json(saved))


def run_status(folder: Path) -> RunStatus:
    """The status of one run folder (it must hold the ``params.json`` a run writes first)."""
    folder = Path(folder)
    params = read_run_params(folder)
    planned = params.train.rounds
    stages = round_stages(method_settings(params).stores_bank)
    done, state = 0, "not started"
    for k in range(planned):
        round_dir = folder / f"round_{k:03d}"
        missing = next((stage for stage in stages if not is_sealed(round_dir, stage)), None)
        if missing is not None:
            if k > 0 or is_sealed(round_dir, "collect") or is_sealed(folder, "base_eval"):
                state = f"stopped in round {k} before {missing}"
            break
        done = k + 1
    metrics_file = folder / "metrics.json"
    metrics = read_json(metrics_file) if metrics_file.exists() else {}
    if done == planned and metrics.get("rounds") == planned:
        state = "finished"
    elif done == planned:
        state = f"stopped after round {done - 1} (summary not written)"
    split = params.eval.splits[0]
    wall = folder / "wall_time.json"
    return RunStatus(folder.name, params.train.env, params.train.method, params.seed, done, planned, state,
                     metrics.get(f"{split}_plain"), metrics.get(f"{split}_with_bank"),
                     metrics.get(f"{split}_base_plain"), metrics.get("last_evaluated_round"),
                     read_json(wall)["seconds"] if wall.exists() else None)


def list_runs(runs_dir: Path) -> list[RunStatus]:
    """Every run folder directly under ``runs_dir``, by name."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise ValueError(f"{runs_dir} is not a folder (train.runs_dir, where `edge train` writes runs)")
    return [run_status(f) for f in sorted(runs_dir.iterdir()) if (f / "params.json").exists()]
