"""The learning benchmark's warm starts and runs as Ray tasks (``edge bench learning --ray ADDRESS``).

A :class:`RayLauncher` is a ``learning.Launch``: it runs the same ``edge warmup`` / ``edge train``
command the local mode runs, with the same arguments and log file, as one Ray task reserving
``cpus`` CPUs and ``gpus`` GPUs on whichever node has them. Everything else (which runs, how many at
once, skipping finished ones, stopping the queue after a failure, the report) stays in ``learning``,
so the two modes differ only in where a command executes.

What a node needs: the same project folder at the same path (the run folders, their logs, the warm
starts and ``params.yaml`` are read and written there, and a run's lock, ``<run>/.edge.lock``, keeps two
writers off one run across machines as on one), and a Python with ``edge`` installed; the task uses
the Python the node's Ray runs on. Each (env, method, seed) is one task, so no two tasks share a run.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from pathlib import Path

from edge.benchmarking.learning import RUN_ENVIRONMENT
from edge.ray_cluster import ADDRESS_VARIABLE, connect, describe_cluster, forwarded_environment


def run_edge_command(arguments: list[str], log_path: str, cwd: str, env_vars: dict[str, str]) -> int:
    """Inside a Ray task: ``edge <arguments>`` in ``cwd`` (the submitter's folder, shared), output
    appended to ``cwd/log_path``; returns its exit status."""
    import ray

    folder = Path(cwd)
    if not folder.is_dir():
        node = ray.util.get_node_ip_address()
        raise RuntimeError(f"{cwd} does not exist on node {node}: every node must mount the benchmark's "
                           "folder at the same path")
    env = dict(os.environ) | env_vars
    # A run that puts its environments on Ray (EDGE_ENV_BACKEND=ray) joins this same cluster.
    env[ADDRESS_VARIABLE] = ray.get_runtime_context().gcs_address
    log = folder / log_path
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        # The child stays in this worker's process group, which Ray kills with the worker: a cancelled
        # task (or a benchmark stopped with Ctrl-C) leaves no run behind holding its folder's lock.
        return subprocess.run([sys.executable, "-m", "edge.cli", *arguments], cwd=folder, env=env,
                              stdout=out, stderr=subprocess.STDOUT).returncode


class RayLauncher:
    """Runs ``edge`` commands as Ray tasks of the cluster at ``address``, each reserving ``cpus`` CPUs
    and ``gpus`` GPUs; calls block until the command ends, so ``learning`` keeps ``jobs`` in flight."""

    def __init__(self, address: str | None, cpus: float = 1.0, gpus: float = 0.0):
        if cpus <= 0 and gpus <= 0:
            raise ValueError("a run must reserve some CPUs or GPUs on the cluster (ray_cpus, ray_gpus)")
        self.ray = connect(address)
        self.cpus, self.gpus = cpus, gpus
        resources = self.ray.cluster_resources()
        for name, need in (("CPU", cpus), ("GPU", gpus)):
            if need > resources.get(name, 0):  # the task would wait for ever
                raise ValueError(f"each run asks for {need:g} {name}s but the Ray cluster has "
                                 f"{resources.get(name, 0):g} in all (--ray-cpus, --ray-gpus)")
        self._task = self.ray.remote(run_edge_command)
        self._cwd = str(Path.cwd().resolve())
        self._env = forwarded_environment() | RUN_ENVIRONMENT
        self._running: set = set()
        self._lock = threading.Lock()

    def __call__(self, arguments: list[str], log_path: Path) -> int:
        # No retries: a run that died is resumed by running the benchmark again, as in the local mode.
        options = {"num_cpus": self.cpus, "num_gpus": self.gpus, "max_retries": 0,
                   "name": f"edge {arguments[0]} {Path(log_path).stem}"}
        ref = self._task.options(**options).remote(arguments, str(log_path), self._cwd, self._env)
        with self._lock:
            self._running.add(ref)
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as err:  # the task itself failed (not the command)
            raise RuntimeError(f"{Path(log_path).stem} failed on the Ray cluster: {err.cause}") from None
        except self.ray.exceptions.RayError as err:  # cancelled, its worker or node died
            raise RuntimeError(f"{Path(log_path).stem} did not finish on the Ray cluster "
                               f"({type(err).__name__}); its output is in {log_path}") from None
        finally:
            with self._lock:
                self._running.discard(ref)

    def cancel_running(self) -> None:
        """Stop every command in flight (their workers are killed, and their children with them)."""
        with self._lock:
            running = list(self._running)
        for ref in running:
            self.ray.cancel(ref, force=True)

    def capacity(self) -> int:
        """How many runs the cluster holds at once, at this launcher's CPUs and GPUs per run."""
        resources = self.ray.cluster_resources()
        fits = [resources.get(name, 0) / need for name, need in (("CPU", self.cpus), ("GPU", self.gpus)) if need > 0]
        return max(1, math.floor(min(fits) + 1e-9))

    def describe(self) -> str:
        gpus = f", {self.gpus:g} GPU" if self.gpus else ""
        return f"{describe_cluster()} ({self.cpus:g} CPU{gpus} per run)"
