"""What the Ray path costs on one machine: the same small learning benchmark run locally and through a
local Ray cluster, and environment steps in-process, in worker processes and in Ray actors.

    .venv/bin/python benchmarks/ray_overhead.py [--repeats 3] [--scales toy-1,toy,small] [--alfworld]

Starts its own 2-CPU Ray cluster on 127.0.0.1 (``edge.ray_cluster.local_cluster``), builds one warm
start, then for each scale runs the two-run benchmark (household; grpo and edge-oracle-bank; seed 0;
``toy-1``: grpo alone) ``--repeats`` times in each mode, alternating which goes first (the machine's
load drifts), each time into fresh run folders. Reported per mode: the median wall time, and the
median of the runs' own clocks (``wall_time.json``: the time inside ``edge train``'s loop), so the
difference shows where the overhead sits. Writes benchmarks/results/ray_overhead.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.benchmarking.learning import warm_starts  # noqa: E402
from edge.ray_cluster import LOOPBACK_CLUSTER_ENV, connect, local_cluster  # noqa: E402

os.environ.update(LOOPBACK_CLUSTER_ENV)  # before Ray is imported

TOY = ["warmup.explore_episodes=2", "warmup.noisy_expert_episodes=1", "warmup.advised_episodes=2",
       "warmup.epochs=1", "warmup.eval_episodes=0", "rollout.tasks_per_round=2", "rollout.group_size=2",
       "rollout.max_steps=6", "grpo.epochs=1", "bank.embedder=hash", "bank.similarity_threshold=0.05"]
SCALES = {
    # one toy run alone: nothing shares the machine with it but the others' work
    "toy-1": {"extra": TOY, "eval_episodes": 3, "methods": ["grpo"]},
    # tests/test_ray.py's benchmark: a run is seconds, so the fixed costs show
    "toy": {"extra": TOY, "eval_episodes": 3},
    # one round at the default round size (16 tasks x 8 episodes), 50 evaluation episodes per split
    "small": {"extra": ["warmup.explore_episodes=20", "warmup.advised_episodes=20", "warmup.noisy_expert_episodes=5",
                        "warmup.epochs=2", "warmup.eval_episodes=0", "bank.embedder=hash"], "eval_episodes": 50},
}


def config(scale: str, work: Path, tag: str, address: str | None):
    from edge.benchmarking.learning import LearningBenchConfig

    settings = SCALES[scale]
    methods = settings.get("methods", ["grpo", "edge-oracle-bank"])
    return LearningBenchConfig(envs=["household"], methods=methods, seeds=[0], budget=0.125,
                               eval_episodes=settings["eval_episodes"], intermediate_episodes=None, eval_every=1,
                               jobs=len(methods), params=ROOT / "params.yaml", runs_dir=work / scale / tag,
                               bases_dir=work / scale / "bases", out_dir=work / scale / f"results-{tag}", name="b",
                               extra=settings["extra"], ray=address)


def bench(scale: str, work: Path, tag: str, address: str | None) -> dict:
    from edge.benchmarking.learning import run_benchmark

    cfg = config(scale, work, tag, address)
    started = time.perf_counter()
    report = run_benchmark(cfg, track=False)
    wall = time.perf_counter() - started
    runs = [r["run_seconds"] for by_seed in report["runs"]["household"].values() for r in by_seed.values()]
    return {"wall_s": wall, "run_s": runs, "table": report["table"]}


def env_steps(backend: str, envs: int = 32, steps: int = 30) -> float:
    """Household steps per second, ``envs`` environments stepped in lockstep ``steps`` times (random agent)."""
    from edge.envs import backends
    from edge.envs.parallel import reset_all, step_all
    from edge.envs.registry import generate_tasks, make_agent, make_env

    os.environ[backends.BACKEND_VARIABLE] = backend
    tasks = generate_tasks("household", "train", envs, 0)
    pool = [make_env("household", max_steps=steps) for _ in tasks]
    agents = [make_agent("household", "random", i) for i in range(envs)]
    firsts = reset_all(pool, tasks)  # also starts the workers: not timed
    for agent, task, first in zip(agents, tasks, firsts):
        agent.reset(task, first)
    seen = [(f.observation, f.admissible_actions) for f in firsts]
    done, started = 0, time.perf_counter()
    active = list(range(envs))
    while active:
        results = step_all([pool[i] for i in active], [agents[i].act(*seen[i]) for i in active])
        still = []
        for i, result in zip(active, results):
            done += 1
            seen[i] = (result.observation, result.info.admissible_actions)
            if not result.done:
                still.append(i)
        active = still
    rate = done / (time.perf_counter() - started)
    backends.close_pools()
    os.environ.pop(backends.BACKEND_VARIABLE)
    return rate


def alfworld_steps(backend: str, games: int = 4, steps: int = 8) -> float:
    """ALFWorld steps per second (reset excluded), ``games`` games in lockstep, random agent."""
    from edge.envs import backends
    from edge.envs.parallel import reset_all, step_all
    from edge.envs.registry import generate_tasks, make_agent, make_env

    os.environ[backends.BACKEND_VARIABLE] = backend
    tasks = generate_tasks("alfworld", "test_unseen", games, 0)
    pool = [make_env("alfworld", max_steps=steps) for _ in tasks]
    agents = [make_agent("alfworld", "random", i) for i in range(games)]
    firsts = reset_all(pool, tasks)
    for agent, task, first in zip(agents, tasks, firsts):
        agent.reset(task, first)
    seen = [(f.observation, f.admissible_actions) for f in firsts]
    done, started = 0, time.perf_counter()
    for _ in range(steps):
        results = step_all(pool, [agent.act(*s) for agent, s in zip(agents, seen)])
        done += len(results)
        seen = [(r.observation, r.info.admissible_actions) for r in results]
    rate = done / (time.perf_counter() - started)
    backends.close_pools()
    os.environ.pop(backends.BACKEND_VARIABLE)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scales", default="toy-1,toy,small")
    parser.add_argument("--alfworld", action="store_true", help="also ALFWorld steps (needs $ALFWORLD_DATA)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/edge-ray-overhead"))
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    args = parser.parse_args()
    if args.render:
        out = json.loads((args.out_dir / "ray_overhead.json").read_text())
        (args.out_dir / "ray_overhead.md").write_text(render(out))
        return
    scales = args.scales.split(",")
    command = "python benchmarks/ray_overhead.py " + " ".join(sys.argv[1:])  # now: some imports rewrite argv
    machine = f"{platform.machine()}, {os.cpu_count()} cores, CPython {platform.python_version()}, CPU only"
    out: dict = {"command": command, "machine": machine, "load_before": os.getloadavg(), "benchmark": {},
                 "env_steps_per_s": {}}
    started = time.perf_counter()
    with local_cluster(num_cpus=2) as address:
        out["cluster_start_s"] = time.perf_counter() - started
        t = time.perf_counter()
        ray = connect(address)
        out["connect_s"] = time.perf_counter() - t

        @ray.remote(num_cpus=1)
        def nothing():
            return None

        t = time.perf_counter()
        ray.get(nothing.remote())
        out["first_task_s"] = time.perf_counter() - t
        trips = []
        for _ in range(50):
            t = time.perf_counter()
            ray.get(nothing.remote())
            trips.append(time.perf_counter() - t)
        out["task_round_trip_ms"] = 1000 * statistics.median(trips)

        for scale in scales:
            warm_starts(config(scale, args.work_dir, "warm", None))  # shared by every repetition; not timed
            rows = {"local": [], "ray": []}
            for i in range(args.repeats):
                order = ("local", "ray") if i % 2 == 0 else ("ray", "local")
                for mode in order:
                    row = bench(scale, args.work_dir, f"{mode}-{i}", address if mode == "ray" else None)
                    rows[mode].append(row)
                    print(f"{scale} {mode} #{i}: {row['wall_s']:.1f} s (runs {row['run_s']})", flush=True)
            same = all(r["table"] == rows["local"][0]["table"] for mode in rows for r in rows[mode])
            out["benchmark"][scale] = {
                mode: {"wall_s": [r["wall_s"] for r in rs], "median_wall_s": statistics.median(r["wall_s"] for r in rs),
                       "median_run_s": statistics.median(s for r in rs for s in r["run_s"])}
                for mode, rs in rows.items()} | {"same_tables": same}
        for backend in ("local", "processes", "ray"):
            os.environ["EDGE_ENV_WORKERS"] = "2"
            os.environ["EDGE_ENV_ACTOR_CPUS"] = "1"
            os.environ["EDGE_RAY_ADDRESS"] = address
            out["env_steps_per_s"][f"household/{backend}"] = env_steps(backend)
            if args.alfworld:
                out["env_steps_per_s"][f"alfworld/{backend}"] = alfworld_steps(backend)
    out["load_after"] = os.getloadavg()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "ray_overhead.json").write_text(json.dumps(out, indent=2) + "\n")
    (args.out_dir / "ray_overhead.md").write_text(render(out))
    print(render(out))


def render(out: dict) -> str:
    """The measurements as markdown tables."""
    lines = ["# The Ray path's overhead on one machine", "",
             f"Machine: {out['machine']}; load average {out['load_before'][0]:.1f} before, "
             f"{out['load_after'][0]:.1f} after (2 cores, shared). Command: `{out['command']}`.", "",
             f"Local 2-CPU Ray cluster on 127.0.0.1: started in {out['cluster_start_s']:.1f} s; joining it took "
             f"{out['connect_s']:.1f} s, the first task {out['first_task_s']:.2f} s (a worker process starts), an "
             f"empty task's round trip {out['task_round_trip_ms']:.1f} ms (median of 50).", "",
             "## The same two-run benchmark, local and through Ray", "",
             "Household, grpo and edge-oracle-bank (toy-1: grpo alone), seed 0, one round, the warm start built "
             "beforehand and shared; the runs in parallel in both modes; fresh run folders every time, the modes "
             "alternating. toy: the tests' scale (seconds per run); small: one round of 16 tasks x 8 episodes, 50 "
             "evaluation episodes per split and condition. `run` is the "
             "median of the runs' own clocks (`wall_time.json`, the time inside `edge train`'s loop).", "",
             "| scale | mode | wall time per repetition (s) | median wall (s) | median run (s) | Ray − local (s) | "
             "same tables |", "|---|---|---|---|---|---|---|"]
    for scale, modes in out["benchmark"].items():
        local, ray = modes["local"]["median_wall_s"], modes["ray"]["median_wall_s"]
        for mode in ("local", "ray"):
            m = modes[mode]
            walls = ", ".join(f"{w:.1f}" for w in m["wall_s"])
            diff = f"{ray - local:+.1f} ({(ray - local) / local:+.0%})" if mode == "ray" else ""
            same = ("yes" if modes["same_tables"] else "no") if mode == "ray" else ""
            lines.append(f"| {scale} | {mode} | {walls} | {m['median_wall_s']:.1f} | {m['median_run_s']:.1f} | "
                         f"{diff} | {same} |")
    lines += ["", "## Environment steps: in-process, 2 worker processes, 2 Ray actors", "",
              "Steps per second of environments stepped in lockstep by a random agent (32 household environments; "
              "ALFWorld: 4 games), workers started beforehand.", "", "| environment / backend | steps/s |",
              "|---|---|"]
    lines += [f"| {key} | {rate:,.0f} |" for key, rate in out["env_steps_per_s"].items()]
    lines += ["", "## Reading", "",
              "The Ray path adds no measurable cost to a benchmark here: its fixed costs (the cluster's start, once; "
              "joining it; a task's round trip) are seconds at most, against runs of minutes to hours. It even came "
              "out faster in every pair, the runs' own clocks included, so the difference lies in how this machine, "
              "shared with other work (see the load), scheduled the processes, not in anything Ray adds; its cause "
              "was not isolated (the runs get the same environment variables and one thread either way; Ray starts "
              "its workers, and so the runs, at nice 15, which if anything would slow them). "
              "Environments: one actor call costs about a millisecond, so the built-in environments' microsecond "
              "steps are several times slower in actors (keep them in-process: the default), while ALFWorld's "
              "tens of milliseconds per step are not slowed, and on a cluster its actors bring other nodes' CPUs."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
