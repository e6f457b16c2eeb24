"""`edge serve` + `prefect deployment run`: a real training through a Prefect server on loopback."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


INSPECT = """
import json
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, FlowRunFilter, TaskRunFilter
with get_client(sync_client=True) as client:
    run = client.read_flow_runs()[0]
    tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [run.id]}))
    only_this_run = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
    artifacts = client.read_artifacts(artifact_filter=only_this_run)
    print(json.dumps({"name": run.name, "tags": run.tags, "tasks": [t.name for t in tasks],
                      "artifact_key": artifacts[0].key, "markdown": artifacts[0].data}))
"""


def test_serve_and_run_the_default_deployment(tmp_path):
    port = free_port()
    env = os.environ | {"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
                        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
                        "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    serve = subprocess.Popen([str(BIN / "edge"), "serve", "--port", str(port), "--params", str(ROOT / "params.yaml")],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            listed = subprocess.run([str(BIN / "prefect"), "deployment", "ls"], env=env | {"COLUMNS": "250"},
                                    capture_output=True,
                                    text=True, timeout=60)
            if "grpo-baseline" in listed.stdout and "edge-no-prune" in listed.stdout:
                break
            assert serve.poll() is None, serve.stdout.read()
            assert time.monotonic() < deadline, "deployments never appeared"
            time.sleep(3)
        overrides = ["data.train_tasks=10", "rollout.tasks_per_round=2", "rollout.group_size=2",
                     "rollout.max_steps=4", "eval.episodes=2", "bank.embedder=hash", "train.base_checkpoint=null",
                     f"train.runs_dir={tmp_path / 'runs'}"]
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "edge-training/default", "--param", "rounds=1",
             "--param", f"overrides={json.dumps(overrides)}", "--watch", "--watch-timeout", "400"],
            env=env, capture_output=True, text=True, timeout=460)
        assert run.returncode == 0, run.stdout + run.stderr
        runs = subprocess.run([str(BIN / "prefect"), "flow-run", "ls"], env=env | {"COLUMNS": "250"},
                              capture_output=True, text=True, timeout=60)
        assert "edge-training" in runs.stdout and "COMPLETED" in runs.stdout, runs.stdout
        metrics = json.loads((tmp_path / "runs" / "household-edge-s0" / "metrics.json").read_text())
        assert metrics["method"] == "edge" and metrics["rounds"] == 1
        # Through Prefect's client: the flow run is named like its run folder and tagged, its tasks carry
        # the round, and the run's markdown report links its MLflow run.
        query = subprocess.run([sys.executable, "-c", INSPECT], env=env, capture_output=True, text=True, timeout=120)
        assert query.returncode == 0, query.stderr
        seen = json.loads(query.stdout)
        assert seen["name"] == "household-edge-s0", seen
        assert {"edge", "household", "seed-0"} <= set(seen["tags"]), seen
        assert {"collect-rollouts-r0", "distill-policy-r0", "evaluate-r0"} <= set(seen["tasks"]), seen
        assert seen["artifact_key"] == "edge-household-edge-s0"
        assert "| 0 |" in seen["markdown"] and "MLflow: [household-edge-s0](http://127.0.0.1:5000/#/experiments/" \
            in seen["markdown"]
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
