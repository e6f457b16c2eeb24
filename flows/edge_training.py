"""Prefect flow ``edge-training``: R rounds of collect-rollouts -> score-contribution -> update-bank ->
distill-policy -> evaluate. Wiring only: every task calls one stage function of ``edge.train``.

Stages skip work whose outputs exist, so re-running a flow on the same run folder resumes where it
stopped; transient failures retry. Parameters are validated before anything runs.
"""

from __future__ import annotations

import os
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
from edge.config import load_params, with_overrides  # noqa: E402
from edge.pipeline import format_round, run_pipeline  # noqa: E402

# Our stages resume from their own outputs; Prefect's caching and result storage would duplicate that.
TASK_OPTIONS = {"retries": 2, "retry_delay_seconds": 3, "cache_policy": NO_CACHE, "persist_result": False}

collect_rollouts = task(name="collect-rollouts", **TASK_OPTIONS)(stages.collect_stage)
score_contribution = task(name="score-contribution", **TASK_OPTIONS)(stages.score_stage)
update_bank = task(name="update-bank", **TASK_OPTIONS)(stages.update_bank_stage)
distill_policy = task(name="distill-policy", **TASK_OPTIONS)(stages.update_stage)
evaluate = task(name="evaluate", **TASK_OPTIONS)(stages.evaluate_stage)

PREFECT_STAGES = {"collect": collect_rollouts, "score": score_contribution, "update_bank": update_bank,
                  "distill": distill_policy, "evaluate": evaluate}


@flow(name="edge-training", log_prints=True)
def edge_training(params_path: str = "params.yaml", method: str | None = None, env: str | None = None,
                  rounds: int | None = None, seed: int | None = None, overrides: list[str] | None = None,
                  track: bool = True) -> dict:
    """Train one (method, env, seed) for ``rounds`` rounds; ``overrides`` are ``section.key=value``."""
    extra = list(overrides or [])
    for key, value in (("train.method", method), ("train.env", env), ("train.rounds", rounds), ("seed", seed)):
        if value is not None:
            extra.append(f"{key}={value}")
    params = with_overrides(load_params(params_path), extra)  # ConfigError here fails the flow at once
    return run_pipeline(params, stages=PREFECT_STAGES, track=track,
                        on_round=lambda k, summary, run: print("\n".join(format_round(k, summary, run))))


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
