"""Scale-out on Ray: the benchmark's runs as Ray tasks and environments as Ray actors give what the
local mode gives. A 2-CPU Ray cluster on 127.0.0.1 (no dashboard) is started for this file and stopped
after it; the whole file takes 75 s on two quiet cores (about two minutes when others load them).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from edge.ray_cluster import LOOPBACK_CLUSTER_ENV, local_cluster

# Before Ray is imported in this process (importorskip imports it): a loopback-only cluster, no token,
# no telemetry.
os.environ.update(LOOPBACK_CLUSTER_ENV)
pytest.importorskip("ray", reason="the ray extra is not installed (pip install -c constraints.txt -e '.[ray]')")

from edge.envs.household import generate_tasks  # noqa: E402
from edge.envs.parallel import RemoteEnv, WorkerError, reset_all, step_all  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ALFWORLD_DATA = Path(os.environ.get("ALFWORLD_DATA") or ROOT.parent / "shared" / "data" / "alfworld")

TINY = ["warmup.explore_episodes=2", "warmup.noisy_expert_episodes=1", "warmup.advised_episodes=2",
        "warmup.epochs=1", "warmup.eval_episodes=0", "rollout.tasks_per_round=2", "rollout.group_size=2",
        "rollout.max_steps=6", "grpo.epochs=1", "bank.embedder=hash", "bank.similarity_threshold=0.05"]
"""The toy scale of tests/test_bench_learning.py: a run takes seconds."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """``ray start --head`` on 127.0.0.1 with 2 CPUs and no dashboard; its address; stopped afterwards."""
    with local_cluster(num_cpus=2) as address:
        yield address


# ----- environments as actors ----------------------------------------------------------------------
def rollout_rows(monkeypatch, backend: str | None) -> list[dict]:
    """A tiny policy's rollouts of 3 household tasks x 2 members, with environments on ``backend``."""
    from edge.config import PolicyConfig
    from edge.policy.actor import Actor
    from edge.policy.model import load_policy
    from edge.rollout import rollout, to_table

    if backend is None:
        monkeypatch.delenv("EDGE_ENV_BACKEND", raising=False)
    else:
        monkeypatch.setenv("EDGE_ENV_BACKEND", backend)
    policy = load_policy(PolicyConfig(), envs=["household"], seed=0)
    trajectories = rollout(Actor(policy), generate_tasks("test_seen", 3, seed=0), 2, seed=7, max_steps=8)
    return to_table(trajectories).to_pylist()


def test_household_in_ray_actors_replays_in_process_rollouts(cluster, monkeypatch):
    from edge.envs import backends
    from edge.envs.ray_pool import RayEnvPool
    from edge.envs.registry import make_env

    monkeypatch.setenv("EDGE_RAY_ADDRESS", cluster)
    monkeypatch.setenv("EDGE_ENV_WORKERS", "2")
    monkeypatch.setenv("EDGE_ENV_ACTOR_CPUS", "0.5")
    try:
        local = rollout_rows(monkeypatch, None)
        on_ray = rollout_rows(monkeypatch, "ray")
        in_processes = rollout_rows(monkeypatch, "processes")
        env = make_env("household", max_steps=5)
        assert isinstance(env, RemoteEnv) and env.max_steps == 5
        assert isinstance(backends.shared_pool("ray", "household", "edge.envs.household"), RayEnvPool)
        # the same trajectories step for step: observations, actions, log-probabilities, rewards
        assert len(local) > 6 and on_ray == local and in_processes == local
        # an actor's error carries its traceback, and the actor carries on
        with pytest.raises(WorkerError, match=r"call reset\(task\) before step\(\)"):
            make_env("household").step("look")
        task = generate_tasks("train", 1, seed=0)[0]
        assert make_env("household").reset(task).instruction == task.instruction
        with pytest.raises(ValueError, match="EDGE_ENV_BACKEND='threads'"):
            monkeypatch.setenv("EDGE_ENV_BACKEND", "threads")
            make_env("household")
    finally:
        backends.close_pools()


HAVE_ALFWORLD = all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))
needs_games = pytest.mark.skipif(
    not (HAVE_ALFWORLD and (ALFWORLD_DATA / "json_2.1.1").is_dir()),
    reason=("the alfworld extra is not installed" if not HAVE_ALFWORLD else
            f"no ALFWorld games at {ALFWORLD_DATA} (set ALFWORLD_DATA to a folder with json_2.1.1/ and logic/)"))


@needs_games
def test_alfworld_in_ray_actors_replays_in_process_play(cluster, monkeypatch):
    """Two games, each in a group of two, a seeded random agent per member: every step's answer from
    actors equals the in-process game's."""
    from edge.envs import backends
    from edge.envs.registry import generate_tasks as tasks_of
    from edge.envs.registry import make_agent, make_env

    monkeypatch.setenv("ALFWORLD_DATA", str(ALFWORLD_DATA))
    monkeypatch.setenv("EDGE_RAY_ADDRESS", cluster)
    monkeypatch.setenv("EDGE_ENV_WORKERS", "2")
    monkeypatch.setenv("EDGE_ENV_ACTOR_CPUS", "0.5")

    def play(backend: str) -> list:
        monkeypatch.setenv("EDGE_ENV_BACKEND", backend)
        tasks = [t for t in tasks_of("alfworld", "test_unseen", 2, 0) for _ in range(2)]
        envs = [make_env("alfworld", max_steps=4) for _ in tasks]
        assert all(isinstance(e, RemoteEnv) for e in envs) == (backend == "ray")
        agents = [make_agent("alfworld", "random", i) for i in range(len(tasks))]
        firsts = reset_all(envs, tasks)
        record = [firsts]
        for agent, task, first in zip(agents, tasks, firsts):
            agent.reset(task, first)
        observations = [(f.observation, f.admissible_actions) for f in firsts]
        for _ in range(4):
            actions = [agent.act(*seen) for agent, seen in zip(agents, observations)]
            steps = step_all(envs, actions)
            record.append((actions, steps))
            observations = [(s.observation, s.info.admissible_actions) for s in steps]
        return record

    try:
        assert play("ray") == play("local")
    finally:
        backends.close_pools()


# ----- the benchmark on Ray --------------------------------------------------------------------------
def bench_args(tmp_path: Path, runs: str, *extra: str) -> list[str]:
    return ["bench", "learning", "--env", "household", "--method", "grpo", "--method", "edge-oracle-bank",
            "--seed", "0", "--budget", "0.125", "--eval-episodes", "3", "--eval-every", "1",
            "--runs-dir", str(tmp_path / runs), "--bases-dir", str(tmp_path / "bases"),
            "--out-dir", str(tmp_path / f"results-{runs}"), "--name", "toy", "--no-track",
            "--params", str(ROOT / "params.yaml"), *sum((["--set", s] for s in TINY), []), *extra]


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    """One folder for the benchmark tests: the warm start is built once, and the flow compares its tables
    with the local mode's."""
    return tmp_path_factory.mktemp("toy")


def run_bench(folder: Path, mode: str, *extra: str) -> tuple[dict, float]:
    from typer.testing import CliRunner

    from edge.cli import app

    started = time.perf_counter()
    result = CliRunner().invoke(app, bench_args(folder, mode, *extra))
    seconds = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    return json.loads((folder / f"results-{mode}" / "toy.json").read_text()), seconds


def same_runs(a: dict, b: dict) -> bool:
    """The same curves, final evaluations and per-task outcomes (folders and clocks aside)."""
    def strip(report):
        return {m: {s: {k: v for k, v in run.items() if k not in ("folder", "run_seconds")}
                    for s, run in by_seed.items()} for m, by_seed in report["runs"]["household"].items()}
    return strip(a) == strip(b)


def test_a_two_run_benchmark_on_ray_gives_the_local_tables(cluster, toy):
    local, local_seconds = run_bench(toy, "local", "--jobs", "2")
    # the warm start is shared (--bases-dir): the Ray mode times the same two runs, not a warm start
    on_ray, ray_seconds = run_bench(toy, "ray", "--ray", cluster)
    print(f"\ntwo-run benchmark: local {local_seconds:.1f} s (with the warm start), through Ray {ray_seconds:.1f} s")
    assert on_ray["table"] == local["table"] and on_ray["bank_activity"] == local["bank_activity"]
    assert same_runs(on_ray, local)
    for method in ("grpo", "edge-oracle-bank"):
        assert (toy / "ray" / "logs" / f"household-{method}-s0.log").stat().st_size > 0
    assert on_ray["machine"].startswith("Ray cluster of 1 node, 2 CPUs") and on_ray["config"]["jobs"] == 2
    assert on_ray["config"]["ray"] == cluster and local["config"]["ray"] is None
    ray_md = (toy / "results-ray" / "toy.md").read_text()
    assert ray_md.split("Command:")[0] == (toy / "results-local" / "toy.md").read_text().split("Command:")[0]


@pytest.fixture
def prefect_server(tmp_path):
    """A Prefect server on 127.0.0.1 for this test (Ray workers report to it; the ephemeral mode would
    start one in every worker), used through temporary settings."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from edge.prefect_server import running_prefect_server

    with running_prefect_server(free_port(), tmp_path / "prefect", timeout=120, quiet=True) as api:
        with temporary_settings(updates={PREFECT_API_URL: api}):
            yield api


def test_the_benchmark_flow_runs_its_runs_on_ray_through_prefect_ray(cluster, toy, prefect_server):
    from prefect.client.orchestration import get_client

    from flows.edge_benchmark import edge_benchmark

    local_json = toy / "results-local" / "toy.json"
    local = json.loads(local_json.read_text()) if local_json.exists() else run_bench(toy, "local")[0]
    # The runs the Ray benchmark finished, if it ran first: the flow's tasks then resume them (nothing to
    # do but start `edge train`), as a rerun of the benchmark would; else they train them.
    result = edge_benchmark(envs=["household"], methods=["grpo", "edge-oracle-bank"], seeds=[0], budget=0.125,
                            eval_episodes=3, eval_every=1, params_path=str(ROOT / "params.yaml"),
                            runs_dir=str(toy / "ray"), out_dir=str(toy / "results-flow"),
                            bases_dir=str(toy / "bases"), name="toy", overrides=TINY, task_runner="ray",
                            ray_address=cluster, track=False)
    flow_report = json.loads((toy / "results-flow" / "toy.json").read_text())
    assert result["table"] == local["table"] and same_runs(flow_report, local)
    assert flow_report["machine"].startswith("Prefect flow edge-benchmark, task runner ray")
    with get_client(sync_client=True) as client:
        names = {t.name: t.state_name for t in client.read_task_runs()}
    assert names["household-grpo-s0"] == names["household-edge-oracle-bank-s0"] == "Completed"


def test_a_failed_run_on_ray_names_its_log_and_stops_the_queue(cluster, tmp_path, monkeypatch):
    from edge.benchmarking.learning import LearningBenchConfig, run_benchmark

    monkeypatch.chdir(tmp_path)
    cfg = LearningBenchConfig(envs=["household"], methods=["grpo"], seeds=[0, 1, 2], jobs=1, eval_episodes=0,
                              params=ROOT / "params.yaml", runs_dir=Path("runs"), out_dir=Path("results"),
                              ray=cluster)  # 0 evaluation episodes: invalid, so every run fails at once
    for seed in (0, 1, 2):
        (tmp_path / "runs" / f"base-household-s{seed}").mkdir(parents=True)
        (tmp_path / "runs" / f"base-household-s{seed}" / "warmup.json").write_text("{}")
    with pytest.raises(RuntimeError, match=r"run household-grpo-s0 failed \(exit \d+\); its output is in "
                                           r"runs/logs/household-grpo-s0\.log"):
        run_benchmark(cfg, track=False)
    assert sorted(p.name for p in (tmp_path / "runs" / "logs").iterdir()) == ["household-grpo-s0.log"]
    assert "eval.episodes" in (tmp_path / "runs" / "logs" / "household-grpo-s0.log").read_text()
