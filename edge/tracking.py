"""MLflow tracking: one experiment per environment, one run per (method, seed), a metric per round.

The store lives in the project (``sqlite:///<project>/mlflow.db``, artifacts under ``mlartifacts/``)
unless MLFLOW_TRACKING_URI says otherwise. A training run folder remembers its MLflow run id and
which rounds it has logged, so a resumed run logs each round exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{PROJECT / 'mlflow.db'}"


def flatten(data: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= flatten(value, f"{name}.")
        else:
            out[name] = str(value)
    return out


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class Tracker:
    """Logs one training run folder to MLflow."""

    def __init__(self, run_folder: Path, params: dict):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        import mlflow

        self.mlflow = mlflow
        self.folder = Path(run_folder)
        self.state_file = self.folder / "mlflow.json"
        mlflow.set_tracking_uri(tracking_uri())
        env, method, seed = params["train"]["env"], params["train"]["method"], params["seed"]
        name = f"edge-{env}"
        experiment = mlflow.get_experiment_by_name(name)
        if experiment is None:
            artifacts = (PROJECT / "mlartifacts" / name).as_uri()
            experiment_id = mlflow.create_experiment(name, artifact_location=artifacts)
        else:
            experiment_id = experiment.experiment_id
        state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        self.client = mlflow.tracking.MlflowClient()
        run_id = state.get("run_id")
        if run_id is None:
            run = self.client.create_run(experiment_id, run_name=f"{method}-s{seed}", tags={
                "method": method, "seed": str(seed), "env": env, "git_commit": git_commit(),
                "dvc_experiment": os.environ.get("DVC_EXP_NAME", ""), "run_folder": str(self.folder)})
            run_id = run.info.run_id
            for key, value in flatten(params).items():
                self.client.log_param(run_id, key, value[:6000])
        self.run_id = run_id
        self.logged = set(state.get("logged_rounds", []))
        self._save()

    def _save(self) -> None:
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        tmp.write_text(json.dumps({"run_id": self.run_id, "logged_rounds": sorted(self.logged)}))
        tmp.replace(self.state_file)

    def log_round(self, k: int, summary: dict, round_dir: Path) -> None:
        """Every numeric per-round metric at step k, and the bank snapshot; once per round."""
        if k in self.logged:
            return
        for key, value in summary.items():
            if isinstance(value, bool):
                value = float(value)
            if isinstance(value, int | float) and key != "round":
                self.client.log_metric(self.run_id, key, float(value), step=k)
        snapshot = round_dir / "bank.parquet"
        if snapshot.exists():
            self.client.log_artifact(self.run_id, str(snapshot), artifact_path=f"bank/round_{k:03d}")
        self.logged.add(k)
        self._save()

    def log_files(self, paths: list[Path], artifact_path: str) -> None:
        for path in paths:
            self.client.log_artifact(self.run_id, str(path), artifact_path=artifact_path)

    def finish(self) -> None:
        self.client.set_terminated(self.run_id)


def params_dict(params) -> dict:
    return yaml.safe_load(yaml.safe_dump(params.model_dump(mode="json")))
