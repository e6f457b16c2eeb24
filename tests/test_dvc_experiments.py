"""`dvc exp run --temp -S ...` as the README documents it: the experiment runs beside the main job and
leaves params.yaml, the main job's committed results and its run folder as they were, and DVC can
compare it with the committed baseline. Uses the project's own dvc.yaml at a tiny size."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

TINY_PARAMS = """\
seed: 0
policy: {model: tiny}
distill: {coef: 1.0}
data: {envs: [household], train_tasks: 20, test_seen_tasks: 10, test_unseen_tasks: 10, out_dir: data/tasks}
warmup: {env: household, explore_episodes: 4, noisy_expert_episodes: 2, advised_episodes: 4, epochs: 1,
         eval_episodes: 2, out_dir: checkpoints/base}
rollout: {tasks_per_round: 2, group_size: 2, max_steps: 4}
grpo: {epochs: 1, minibatches: 2}
bank: {embedder: hash, block_follows_progress: false}
eval: {episodes: 2}
train: {env: household, method: edge, rounds: 1, base_checkpoint: checkpoints/base, runs_dir: runs}
"""


def digest(paths):
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path).encode() + path.read_bytes())
    return h.hexdigest()


def test_dvc_exp_run_temp_leaves_the_main_job_as_it_was(tmp_path):
    repo = tmp_path / "project"
    repo.mkdir()
    # The stages run the installed `edge`; the copies are what dvc.yaml hashes as dependencies.
    for name in ("edge", "flows", "data/seeds"):
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "dvc.yaml", repo / "dvc.yaml")
    (repo / "params.yaml").write_text(TINY_PARAMS)
    (repo / ".gitignore").write_text("mlflow.db\nmlartifacts/\n.prefect/\n")
    env = os.environ | {"PATH": f"{BIN}:{os.environ['PATH']}", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'ml.db'}",
                        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"}

    def sh(*cmd, timeout=600):
        done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    sh("git", "init", "-q")
    sh("dvc", "init", "-q")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "project")
    # The main job (one method here), committed as the baseline: dvc.lock and the metrics files.
    sh("dvc", "repro", "train@grpo")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "main job")
    watched = [repo / "params.yaml", *(repo / "results").rglob("*"), *(repo / "runs").rglob("*")]
    watched = [p for p in watched if p.is_file()]
    before = digest(watched)

    sh("dvc", "exp", "run", "--temp", "-S", "train.rounds=2", "train@grpo")

    assert digest([p for p in watched if p.exists()]) == before and all(p.exists() for p in watched)
    assert "rounds: 1" in (repo / "params.yaml").read_text()
    assert not (repo / "runs" / "grpo" / "round_001").exists()
    assert sh("git", "status", "--porcelain").strip() == ""
    # The experiment is recorded beside the baseline, with its own parameters and metrics.
    shown = json.loads(sh("dvc", "exp", "show", "--json"))
    experiments = [e for row in shown for e in (row.get("experiments") or []) for e in e.get("revs", [])]
    assert experiments, shown
    data = experiments[0]["data"]
    assert data["params"]["params.yaml"]["data"]["train"]["rounds"] == 2
    assert data["metrics"]["results/grpo/metrics.json"]["data"]["rounds"] == 2
    baseline = next(row for row in shown if row["rev"] != "workspace")["data"]
    assert baseline["metrics"]["results/grpo/metrics.json"]["data"]["rounds"] == 1
