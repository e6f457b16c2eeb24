"""Prefect flow ``edge-benchmark``: the learning benchmark with every warm start and every (env, method,
seed) run a task run, executed by the flow's task runner: threads of this machine (``task_runner=
"threads"``, ``jobs`` at a time) or a Ray cluster (``"ray"``, prefect-ray's ``RayTaskRunner``: each run a
Ray task reserving ``ray_cpus`` CPUs and ``ray_gpus`` GPUs). Wiring only: the tasks call
``edge.benchmarking.learning``'s functions, and the tables are the ones ``edge bench learning`` writes.

Why the run is the task, on Ray: ``edge-training``'s tasks are the stages of one run, in order, sharing
one process's model, bank and the run folder's lock, so there is nothing in them to spread over
machines; the runs of a benchmark are independent, hours each, and need CPUs or a GPU. A Ray cluster
places them by those resources on whichever node has them (Prefect work pools place flow runs on
whichever worker polls, with no notion of CPUs or GPUs), and it is the cluster environment actors
already use (``EDGE_ENV_BACKEND=ray``), so one set of machines serves both.

On Ray, the task runs inside a Ray worker, which reports to the Prefect API this flow uses: give it a
server (``PREFECT_API_URL``) every node can reach, not the ephemeral one (each worker would start its own).
Paths are made absolute, and the folder must be on a filesystem every node mounts at the same path.

    python -m flows.edge_benchmark --task-runner ray --ray-address HOST:6379 --env household --seed 0 ...
    python -m flows.edge_benchmark --serve      # deployment edge-benchmark/default; then
    prefect deployment run edge-benchmark/default --param task_runner=ray --param ray_address=HOST:6379
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from pathlib import Path

# isort: off
# Importing the training flow first sets Prefect's defaults (state in the project, nothing phones home)
# before Prefect itself is imported.
import flows.edge_training  # noqa: F401

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait
# isort: on

from edge.benchmarking.learning import (  # noqa: E402
    LearningBenchConfig,
    base_checkpoint,
    base_folder,
    markdown,
    rounds_for,
    run_locally,
    train_one,
    write_report,
)
from edge.config import METHODS  # noqa: E402

# No retries: a failed run is reported with its log, and the next flow run resumes it, as `edge bench
# learning` does; our runs resume from their own files, so Prefect's caching would duplicate that.
TASK_OPTIONS = {"cache_policy": NO_CACHE, "persist_result": False}


@task(name="warm-start", task_run_name="warm-start-{env}-s{seed}", **TASK_OPTIONS)
def warm_start(cfg: LearningBenchConfig, env: str, seed: int) -> str:
    return str(base_checkpoint(cfg, env, seed, launch=run_locally))


@task(name="train-run", task_run_name="{env}-{method}-s{seed}", **TASK_OPTIONS)
def train_run(cfg: LearningBenchConfig, env: str, method: str, seed: int, base: str, rounds: int) -> str:
    return str(train_one(cfg, env, method, seed, Path(base), rounds, cfg.runs_dir / "logs"))


def make_task_runner(kind: str, jobs: int, ray_address: str | None = None):
    """``threads``: ``jobs`` runs at a time on this machine; ``ray``: prefect-ray's runner on the cluster
    at ``ray_address`` (else ``$EDGE_RAY_ADDRESS`` / ``$RAY_ADDRESS``; none: a private local instance)."""
    if kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=jobs)
    if kind != "ray":
        raise ValueError(f"task_runner {kind!r}: expected threads or ray")
    from edge.ray_cluster import ADDRESS_VARIABLE, cluster_address, forwarded_environment, prepare_for, require_ray

    address = cluster_address(ray_address)
    prepare_for(address)  # before prefect_ray imports Ray
    require_ray()
    from prefect_ray import RayTaskRunner

    # Ray workers inherit the environment `ray start` ran in, not this one: hand over EDGE's settings.
    env_vars = forwarded_environment() | ({ADDRESS_VARIABLE: address} if address else {})
    init = {"runtime_env": {"env_vars": env_vars}, "log_to_driver": False}
    if address is None:
        init["include_dashboard"] = False
    return RayTaskRunner(address=address, init_kwargs=init)


def run_resources(kind: str, cpus: float, gpus: float):
    """What each task reserves: on Ray, its CPUs and GPUs; on threads, nothing to say."""
    if kind != "ray":
        return nullcontext()
    from prefect_ray.context import remote_options

    return remote_options(num_cpus=cpus, num_gpus=gpus, max_retries=0)


@flow(name="edge-benchmark-runs")
def benchmark_runs(cfg: LearningBenchConfig, rounds: int, kind: str = "threads", cpus: float = 1.0,
                   gpus: float = 0.0) -> dict:
    """Every warm start, then every run (each waits for its own warm start only); all of them end before
    the first failure (in the benchmark's order) is raised, so one failed run costs no other."""
    with run_resources(kind, cpus, gpus):
        bases = {}
        for env in cfg.envs:
            for seed in cfg.seeds:
                folder = base_folder(cfg, env, seed)
                if folder not in bases:  # seeds sharing a warm start build it once
                    bases[folder] = warm_start.submit(cfg, env, seed)
        runs = {(env, method, seed): train_run.submit(cfg, env, method, seed, bases[base_folder(cfg, env, seed)],
                                                      rounds)
                for env in cfg.envs for seed in cfg.seeds for method in cfg.methods}
    wait(list(runs.values()))
    return {job: Path(future.result()) for job, future in runs.items()}


@flow(name="edge-benchmark", log_prints=True)
def edge_benchmark(envs: list[str] | None = None, methods: list[str] | None = None, seeds: list[int] | None = None,
                   budget: float = 1.0, eval_episodes: int = 400, intermediate_episodes: int | None = 200,
                   eval_every: int = 4, splits: list[str] | None = None, params_path: str = "params.yaml",
                   runs_dir: str = "benchmarks/runs", out_dir: str = "benchmarks/results", name: str = "learning",
                   overrides: list[str] | None = None, shared_warm_start: bool = False, bases_dir: str | None = None,
                   warm_start_env: str | None = None, jobs: int = 2, task_runner: str = "threads",
                   ray_address: str | None = None,
                   ray_cpus: float = 1.0, ray_gpus: float = 0.0, track: bool = True) -> dict:
    """The learning benchmark as a flow; the tables go to ``<out_dir>/<name>.md/.json`` (and MLflow).

    Args:
        envs: Environments with a warm start (default household and shop).
        methods: Methods to compare, grpo among them (default all).
        seeds: Training seeds (default 0-4).
        budget: Multiplies train.rounds.
        eval_episodes: Evaluation episodes per split and condition at the base and the final point.
        intermediate_episodes: Episodes at the curve's points in between.
        eval_every: Evaluate every this many rounds.
        splits: Evaluation splits (default test_seen and test_unseen).
        params_path: The project's parameters file.
        runs_dir: Where the runs and warm starts go (resumable).
        out_dir: Where the tables and plots go.
        name: Stem of the result files.
        overrides: More section.key=value overrides for every run.
        shared_warm_start: One warm start for every seed.
        bases_dir: Where the warm starts are built and reused (default runs_dir).
        warm_start_env: Environment the warm starts are made in (default each run's own): household for
            runs on household_moved, a world that changed after the warm start.
        jobs: Runs at a time with the threads runner.
        task_runner: threads (this machine) or ray (prefect-ray's RayTaskRunner).
        ray_address: The Ray cluster's head, host:port (default $EDGE_RAY_ADDRESS, $RAY_ADDRESS).
        ray_cpus: CPUs each run reserves on Ray.
        ray_gpus: GPUs each run reserves on Ray.
        track: Log the tables and plots to MLflow (experiment bench-learning).
    """
    def absolute(path: str | None) -> Path | None:
        return None if path is None else Path(path).resolve()

    cfg = LearningBenchConfig(
        envs=list(envs or ["household", "shop"]), methods=list(methods or METHODS),
        seeds=list(seeds or [0, 1, 2, 3, 4]), budget=budget, eval_episodes=eval_episodes,
        intermediate_episodes=intermediate_episodes,
        splits=list(splits or ["test_seen", "test_unseen"]), eval_every=eval_every, jobs=jobs,
        params=absolute(params_path), runs_dir=absolute(runs_dir), out_dir=absolute(out_dir), name=name,
        extra=list(overrides or []), shared_warm_start=shared_warm_start, bases_dir=absolute(bases_dir),
        warm_start_env=warm_start_env, ray=ray_address if task_runner == "ray" else None, ray_cpus=ray_cpus,
        ray_gpus=ray_gpus)
    rounds = rounds_for(cfg)
    runner = make_task_runner(task_runner, jobs, ray_address)
    started = time.perf_counter()
    folders = benchmark_runs.with_options(task_runner=runner)(cfg, rounds, task_runner, ray_cpus, ray_gpus)
    machine = f"Prefect flow edge-benchmark, task runner {task_runner}" + (
        f" (Ray at {cfg.ray or 'a private instance'})" if task_runner == "ray" else f" ({jobs} threads)")
    report = write_report(cfg, folders, rounds, f"prefect flow edge-benchmark ({task_runner})", machine,
                          (time.perf_counter() - started) / 60, track)
    publish_report(report)
    return {"out": str(cfg.out_dir / f"{cfg.name}.md"), "table": report["table"]}


def publish_report(report: dict) -> None:
    """The benchmark's tables as this flow run's markdown artifact."""
    import re

    from prefect.artifacts import create_markdown_artifact

    key = re.sub(r"[^a-z0-9-]+", "-", f"bench-{report['config']['name']}".lower()).strip("-")
    create_markdown_artifact(markdown=markdown(report), key=key, description="The learning benchmark's tables")


def main(argv: list[str] | None = None) -> None:
    """Run the flow once, or ``--serve`` it as deployment ``edge-benchmark/default`` (needs PREFECT_API_URL)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m flows.edge_benchmark", description=main.__doc__)
    parser.add_argument("--serve", action="store_true", help="serve the deployment instead of running once")
    parser.add_argument("--task-runner", default="threads", choices=["threads", "ray"])
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--ray-cpus", type=float, default=1.0)
    parser.add_argument("--ray-gpus", type=float, default=0.0)
    parser.add_argument("--env", dest="envs", action="append")
    parser.add_argument("--method", dest="methods", action="append")
    parser.add_argument("--seed", dest="seeds", action="append", type=int)
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--eval-episodes", type=int, default=400)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--params", dest="params_path", default="params.yaml")
    parser.add_argument("--runs-dir", default="benchmarks/runs")
    parser.add_argument("--out-dir", default="benchmarks/results")
    parser.add_argument("--name", default="learning")
    parser.add_argument("--set", dest="overrides", action="append")
    parser.add_argument("--no-track", dest="track", action="store_false")
    args = vars(parser.parse_args(argv))
    if args.pop("serve"):
        edge_benchmark.serve(name="default", tags=["edge", "benchmark"])
        return
    edge_benchmark(**args)


if __name__ == "__main__":
    main(sys.argv[1:])
