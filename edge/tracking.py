"""MLflow tracking: one experiment per environment, one run per (method, seed), a metric per round.

The store lives in the project (``sqlite:///<project>/mlflow.db``, artifacts under ``mlartifacts/``)
unless MLFLOW_TRACKING_URI says otherwise. A training run folder remembers its MLflow run id and
which rounds it has logged, so a resumed run logs each round exactly once.
"""

from __future__ import annotations

import json
import logging
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


EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
"""MLflow 3's UI opens an experiment without a kind as GenAI (traces); ours train models."""


def experiment_id(client, name: str, description: str = "") -> str:
    """The experiment ``name`` (created with artifacts under ``mlartifacts/<name>``), typed for model
    training; an experiment made before it carried a kind gets one."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        tags = EXPERIMENT_KIND | ({"mlflow.note.content": description} if description else {})
        return client.create_experiment(name, artifact_location=(PROJECT / "mlartifacts" / name).as_uri(), tags=tags)
    for key, value in EXPERIMENT_KIND.items():
        if experiment.tags.get(key) != value:
            client.set_experiment_tag(experiment.experiment_id, key, value)
    expected = (PROJECT / "mlartifacts" / name).as_uri()
    if experiment.artifact_location.startswith("file:") and experiment.artifact_location != expected:
        # MLflow stores an experiment's artifact location as an absolute path and cannot change it.
        logging.getLogger(__name__).warning(
            "MLflow experiment %r keeps its artifacts at %s, not under this project (was it moved?); they go "
            "there. To start the store afresh here, delete mlflow.db and mlartifacts/.", name,
            experiment.artifact_location)
    return experiment.experiment_id


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
        self.client = mlflow.tracking.MlflowClient()
        experiment = experiment_id(self.client, f"edge-{env}",
                                   f"EDGE trainings on `{env}`: one run per run folder (method, seed); step = round, "
                                   "-1 the base checkpoint's evaluation.")
        state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        run_id = state.get("run_id")
        if run_id is None:
            commit = git_commit()
            # Named like its run folder (``<env>-<method>-s<seed>`` unless train.run_name says otherwise).
            run = self.client.create_run(experiment, run_name=self.folder.name, tags={
                "method": method, "seed": str(seed), "env": env, "git_commit": commit,
                "mlflow.source.git.commit": commit, "dvc_experiment": os.environ.get("DVC_EXP_NAME", ""),
                "run_folder": str(self.folder)})
            run_id = run.info.run_id
            # MLflow params cannot change; train.rounds does when a run is extended, so it is a tag.
            for key, value in flatten(params).items():
                if key != "train.rounds":
                    self.client.log_param(run_id, key, value[:6000])
        self.client.set_tag(run_id, "train.rounds", str(params["train"]["rounds"]))
        self.run_id, self.experiment_id = run_id, experiment
        self.logged = set(state.get("logged_rounds", []))
        self._save()

    def _save(self) -> None:
        from edge.files import write_json

        write_json(self.state_file, {"run_id": self.run_id, "experiment_id": self.experiment_id,
                                     "logged_rounds": sorted(self.logged)})

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

    def log_base(self, base: dict) -> None:
        """The starting checkpoint's evaluation at step -1, so every curve starts at the base; once."""
        if -1 in self.logged:
            return
        for key, value in base.items():
            if key != "round" and value is not None:
                self.client.log_metric(self.run_id, key, float(value), step=-1)
        self.logged.add(-1)
        self._save()

    def log_files(self, paths: list[Path], artifact_path: str) -> None:
        for path in paths:
            self.client.log_artifact(self.run_id, str(path), artifact_path=artifact_path)

    def finish(self) -> None:
        self.client.set_terminated(self.run_id)


def params_dict(params) -> dict:
    return yaml.safe_load(yaml.safe_dump(params.model_dump(mode="json")))


def attach_to_runs(run_folders: list[Path], files: list[Path], artifact_path: str) -> int:
    """Log ``files`` (the comparison) to the MLflow run of every run folder that has one; returns how
    many runs got them. Folders trained with tracking off are skipped."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    mlflow.set_tracking_uri(tracking_uri())
    client = mlflow.tracking.MlflowClient()
    attached = 0
    for folder in run_folders:
        state = Path(folder) / "mlflow.json"
        if not state.exists():
            continue
        run_id = json.loads(state.read_text())["run_id"]
        for path in files:
            client.log_artifact(run_id, str(path), artifact_path=artifact_path)
        attached += 1
    return attached
