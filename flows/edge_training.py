"""Prefect flow ``edge-training``: R rounds of collect-rollouts -> score-contribution -> update-bank ->
distill-policy -> evaluate. Wiring only: every task calls one stage function of ``edge.train``.

Stages skip work whose outputs exist, so re-running a flow on the same run folder resumes where it
stopped; transient failures retry. Parameters are validated before anything runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# Defaults for runs that do not come through the Makefile (`dvc repro`, `dvc exp run` typed directly):
# Prefect's state stays in the project, a fresh database gets time to migrate, nothing phones home.
# They must be set before Prefect is imported; explicit settings win.
for _key, _value in {
    "PREFECT_HOME": str(Path(__file__).resolve().parents[1] / ".prefect"),
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",
    "MLFLOW_DISABLE_TELEMETRY": "true",
}.items():
    os.environ.setdefault(_key, _value)

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from edge import train as stages  # noqa: E402
from edge.config import argument_overrides, load_params, run_folder_name, with_overrides  # noqa: E402
from edge.pipeline import format_round, run_pipeline, run_report_markdown  # noqa: E402

# Our stages resume from their own outputs; Prefect's caching and result storage would duplicate that.
TASK_OPTIONS = {"retries": 2, "retry_delay_seconds": 3, "cache_policy": NO_CACHE, "persist_result": False}

# Task runs are named by round (``collect-rollouts-r3``), from the stage's ``k`` argument.
collect_rollouts = task(name="collect-rollouts", task_run_name="collect-rollouts-r{k}", **TASK_OPTIONS)(
    stages.collect_stage)
score_contribution = task(name="score-contribution", task_run_name="score-contribution-r{k}", **TASK_OPTIONS)(
    stages.score_stage)
update_bank = task(name="update-bank", task_run_name="update-bank-r{k}", **TASK_OPTIONS)(stages.update_bank_stage)
distill_policy = task(name="distill-policy", task_run_name="distill-policy-r{k}", **TASK_OPTIONS)(
    stages.update_stage)
evaluate = task(name="evaluate", task_run_name="evaluate-r{k}", **TASK_OPTIONS)(stages.evaluate_stage)

PREFECT_STAGES = {"collect": collect_rollouts, "score": score_contribution, "update_bank": update_bank,
                  "distill": distill_policy, "evaluate": evaluate}


def resolve_params(params_path: str = "params.yaml", method: str | None = None, env: str | None = None,
                   rounds: int | None = None, seed: int | None = None, overrides: list[str] | None = None,
                   run_name: str | None = None, **_):
    """The run's parameters: ``params_path`` with the flow's arguments applied (as ``--set`` would)."""
    extra = list(overrides or []) + argument_overrides(method, env, rounds, seed, run_name)
    return with_overrides(load_params(params_path), extra)


def flow_run_name() -> str:
    """The flow run is named like its run folder (``household-edge-s0``), so runs can be told apart."""
    from prefect.runtime import flow_run

    try:
        return run_folder_name(resolve_params(**flow_run.parameters))
    except Exception:  # a bad parameter fails the flow itself, with the message; the name stays plain
        return "edge-training-invalid-parameters"


def tag_flow_run(params) -> None:
    """Tags env, method and seed on this flow run (deployment tags are kept)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    tags = {"edge", params.train.env, params.train.method, f"seed-{params.seed}"}
    with get_client(sync_client=True) as client:
        client.update_flow_run(flow_run.id, tags=sorted(tags | set(flow_run.tags or [])))


@flow(name="edge-training", flow_run_name=flow_run_name, log_prints=True)
def edge_training(params_path: str = "params.yaml", method: str | None = None, env: str | None = None,
                  rounds: int | None = None, seed: int | None = None, overrides: list[str] | None = None,
                  run_name: str | None = None, track: bool = True) -> dict:
    """Train one (method, env, seed) for some rounds, resuming the run folder if it exists.

    Args:
        params_path: The project's parameters file (relative to the folder the worker runs in).
        method: train.method: grpo, edge, edge-no-distill, edge-static-bank, edge-no-prune, edge-oracle-bank
            or edge-random-bank (default: params.yaml's).
        env: train.env, an environment of the registry, e.g. household, shop, alfworld (default: params.yaml's).
        rounds: train.rounds; more rounds than a finished run has extend it (default: params.yaml's).
        seed: The seed that fixes tasks, sampling and initialisation (default: params.yaml's).
        overrides: Any other parameters as section.key=value, e.g. ["grpo.lr=5e-4", "eval.episodes=50"].
        run_name: The run folder under train.runs_dir, also this flow run's name (default <env>-<method>-s<seed>).
        track: Log to MLflow (the project's mlflow.db unless MLFLOW_TRACKING_URI says otherwise).
    """
    params = resolve_params(params_path, method, env, rounds, seed, overrides, run_name)  # ConfigError fails at once
    tag_flow_run(params)
    result = run_pipeline(params, stages=PREFECT_STAGES, track=track,
                          on_round=lambda k, summary, run: print("\n".join(format_round(k, summary, run))))
    publish_report(Path(result["run_folder"]))
    return result


def publish_report(run_folder: Path) -> None:
    """The run's round table and MLflow link as this flow run's markdown artifact."""
    from prefect.artifacts import create_markdown_artifact

    key = re.sub(r"[^a-z0-9-]+", "-", f"edge-{run_folder.name}".lower()).strip("-")
    create_markdown_artifact(markdown=run_report_markdown(run_folder), key=key,
                             description=f"EDGE run {run_folder.name}: rounds and MLflow link")


# Deployments `edge serve` offers: (name, parameters).
DEPLOYMENTS = {
    "default": {"method": "edge"},
    "grpo-baseline": {"method": "grpo"},
    "edge-no-distill": {"method": "edge-no-distill"},
    "edge-static-bank": {"method": "edge-static-bank"},
    "edge-no-prune": {"method": "edge-no-prune"},
    "edge-oracle-bank": {"method": "edge-oracle-bank"},
    "edge-random-bank": {"method": "edge-random-bank"},
}
