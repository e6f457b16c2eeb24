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
        # The base checkpoint's evaluation is step -1, so the curves start at the base.
        assert sorted(steps) == ([-1, 0, 1, 2] if metric.startswith("eval_") else [0, 1, 2]), (metric, steps)
    run = client.get_run(run_id)
    assert run.data.params["train.method"] == "edge" and run.data.tags["git_commit"]
    assert run.info.run_name == "killed"  # its run folder's name (household-edge-s0 by default)
    assert {run.data.tags[k] for k in ("method", "env", "seed")} == {"edge", "household", "2"}
    assert run.data.tags["train.rounds"] == "3" and "train.rounds" not in run.data.params
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"bank", "plots", "summary"} <= artifacts
    rounds = {a.path for a in client.list_artifacts(run_id, "bank")}
    assert rounds == {"bank/round_000", "bank/round_001", "bank/round_002"}
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.name == "edge-household"
    # Typed for model training, so MLflow 3's UI opens the runs table, not the GenAI overview.
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert {a.path for a in client.list_artifacts(run_id, "summary")} >= {"summary/curve.json",
                                                                          "summary/eval_curve.json"}

    # DVC's own plot converter accepts both curves (rows with the same keys) and draws every line.
    repo = tmp_path / "dvc-repo"
    repo.mkdir()
    for name in ("curve.json", "eval_curve.json"):
        (repo / name).write_text((runs / "killed" / name).read_text())
    (repo / "dvc.yaml").write_text("plots:\n  - curve.json:\n      x: round\n"
                                   "      y: [train_success_plain, delta_mean]\n"
                                   "  - eval_curve.json:\n      x: round\n"
                                   "      y: [eval_test_seen_plain, eval_test_seen_with_bank]\n")
    dvc = str(Path(EDGE).parent / "dvc")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([dvc, "init", "-q"], cwd=repo, check=True)
    shown = subprocess.run([dvc, "plots", "show", "--json"], cwd=repo, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    plots = json.loads(shown.stdout)
    assert not plots.get("errors"), plots["errors"]
    for name, points in (("curve.json", 2 * 3), ("eval_curve.json", 2 * 4)):  # 2 lines x (rounds or base + rounds)
        values = plots["data"][name][0]["content"]["data"]["values"]
        assert len(values) == points and all(v["dvc_inferred_y_value"] is not None for v in values), name
    # `edge plots`: the same charts as a page that needs no network (SVG drawn here, no CDN script).
    subprocess.run([EDGE, "plots", "--out", "offline.html"], cwd=repo, check=True, capture_output=True, timeout=300)
    page = (repo / "offline.html").read_text()
    assert page.count("<svg") == 2 and "<script" not in page and "eval_test_seen_with_bank" in page
