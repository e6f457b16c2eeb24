"""A training run small enough to damage, kill and resume many times in a test (seconds each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from edge.config import parse_params

ROOT = Path(__file__).resolve().parents[2]
EDGE = str(Path(sys.executable).with_name("edge"))
TINY = {
    "seed": 2,
    "data": {"train_tasks": 12},
    "rollout": {"tasks_per_round": 2, "group_size": 4, "max_steps": 6},
    "grpo": {"epochs": 1},
    "eval": {"episodes": 3, "every": 1},
    "bank": {"embedder": "hash", "similarity_threshold": 0.05},
}


def tiny_params(runs: Path, name: str = "run", rounds: int = 2, method: str = "edge", **sections):
    raw = json.loads(json.dumps(TINY))
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    raw["train"] = {"method": method, "rounds": rounds, "run_name": name, "runs_dir": str(runs),
                    "base_checkpoint": None}
    return parse_params(raw)


def tiny_overrides(runs: Path, name: str, rounds: int = 2, method: str = "edge") -> list[str]:
    """The same run as ``tiny_params``, as ``edge train`` arguments."""
    args = ["--method", method, "--rounds", str(rounds), "--run-name", name, "--params", str(ROOT / "params.yaml"),
            "--no-track"]
    for section, values in TINY.items():
        if isinstance(values, dict):
            args += [a for key, value in values.items() for a in ("--set", f"{section}.{key}={value}")]
        else:
            args += ["--set", f"{section}={values}"]
    return args + ["--set", f"train.runs_dir={runs}", "--set", "train.base_checkpoint=null"]


def train_in_subprocess(runs: Path, name: str, fault: str | None = None, rounds: int = 2,
                        timeout: float = 600, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``edge train`` on the tiny run in its own process; ``fault`` sets ``EDGE_FAULT`` (edge/files.py);
    ``extra``: more ``edge train`` arguments (``--set`` overrides)."""
    env = {k: v for k, v in os.environ.items() if k != "EDGE_FAULT"}
    if fault:
        env["EDGE_FAULT"] = fault
    return subprocess.run([EDGE, "train", *tiny_overrides(runs, name, rounds), *extra], env=env, capture_output=True,
                          text=True, timeout=timeout)


def leftovers(folder: Path) -> list[Path]:
    """Temporary files or folders anywhere under ``folder`` (a killed writer's remains)."""
    return [p for p in Path(folder).rglob("*") if p.name.endswith(".tmp") or ".tmp-" in p.name]


def outcome(folder: Path, rounds: int = 2) -> dict:
    """What must be identical between an interrupted-and-resumed run and an uninterrupted one: every
    round's trajectories, scores, weights, bank and held-out evaluation (timings excluded)."""
    from edge.bank.store import read_snapshot

    folder = Path(folder)
    out = {"base": json.loads((folder / "eval_base.json").read_text())["test_seen"]}
    for k in range(rounds):
        d = folder / f"round_{k:03d}"
        files = json.loads((d / "manifest.json").read_text())["files"]
        weights = json.loads((d / "checkpoint" / "edge_manifest.json").read_text())["files"]
        out[k] = {
            "rollouts": files["rollouts.parquet"]["sha256"],
            "scores": files["scores.json"]["sha256"],
            "weights": weights["model.safetensors"]["sha256"],
            "eval": json.loads((d / "eval.json").read_text())["test_seen"],
            "bank": sorted((e.id, e.text, e.status, e.uses, round(e.utility, 9), tuple(e.provenance))
                           for e in read_snapshot(d / "bank.parquet")),
        }
    return out  # (the bank's version numbers differ: a resumed bank update restores, making new versions)
