"""Kill a training run in the middle of a round, rerun it, and compare with an uninterrupted run:
same bank, same metrics, each round logged to MLflow exactly once."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow

from edge.bank.store import read_snapshot

ROOT = Path(__file__).resolve().parents[1]
EDGE = str(Path(sys.executable).with_name("edge"))
TINY = ["seed=2", "data.train_tasks=12", "rollout.tasks_per_round=2", "rollout.group_size=4", "rollout.max_steps=6",
        "grpo.epochs=1", "eval.episodes=3", "eval.every=1", "bank.embedder=hash", "bank.similarity_threshold=0.05",
        "train.base_checkpoint=null"]


def train_cmd(runs: Path, name: str) -> list[str]:
    cmd = [EDGE, "train", "--method", "edge", "--rounds", "3", "--run-name", name,
           "--params", str(ROOT / "params.yaml")]
    for item in TINY + [f"train.runs_dir={runs}"]:
        cmd += ["--set", item]
    return cmd


def test_kill_mid_round_then_resume_matches_an_uninterrupted_run(tmp_path):
    env = os.environ | {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    runs = tmp_path / "runs"
    subprocess.run(train_cmd(runs, "reference"), env=env, check=True, capture_output=True, timeout=600)

    victim = subprocess.Popen(train_cmd(runs, "killed"), env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    marker = runs / "killed" / "round_001" / "scores.json"  # round 1 is under way past its score stage
    deadline = time.monotonic() + 500
    while not marker.exists():
        assert victim.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    assert not (runs / "killed" / "round_002").exists()

    subprocess.run(train_cmd(runs, "killed"), env=env, check=True, capture_output=True, timeout=600)

    def bank(name):
        return sorted((e.id, e.text, e.status, e.uses, round(e.utility, 9), tuple(e.provenance))
                      for e in read_snapshot(runs / name / "round_002" / "bank.parquet"))

    assert bank("killed") == bank("reference")
    for k in range(3):
        ours = json.loads((runs / "killed" / f"round_{k:03d}" / "eval.json").read_text())
        theirs = json.loads((runs / "reference" / f"round_{k:03d}" / "eval.json").read_text())
        assert ours["test_seen"] == theirs["test_seen"]
    assert (json.loads((runs / "killed" / "metrics.json").read_text())
            == json.loads((runs / "reference" / "metrics.json").read_text()))

    # MLflow: one run per training, every per-round metric once per round, artifacts present.
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    client = mlflow.tracking.MlflowClient()
    run_id = json.loads((runs / "killed" / "mlflow.json").read_text())["run_id"]
    for metric in ("train_success_plain", "delta_mean", "bank_size", "entries_added", "pg_loss", "distill_loss",
                   "eval_test_seen_plain", "eval_test_seen_with_bank", "retrieval_hit_rate", "collect_seconds",
                   "tokens", "peak_memory_mb"):
        steps = [m.step for m in client.get_metric_history(run_id, metric)]
        assert sorted(steps) == [0, 1, 2], (metric, steps)
    run = client.get_run(run_id)
    assert run.data.params["train.method"] == "edge" and run.data.tags["git_commit"]
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"bank", "plots", "summary"} <= artifacts
    rounds = {a.path for a in client.list_artifacts(run_id, "bank")}
    assert rounds == {"bank/round_000", "bank/round_001", "bank/round_002"}
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.name == "edge-household"
