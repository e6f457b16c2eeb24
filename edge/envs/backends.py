"""Where environments run: in this process, in worker processes, or in Ray actors.

``EDGE_ENV_BACKEND`` chooses, for every environment ``registry.make_env`` builds (rollouts, evaluation,
``edge env play``), and reaches the runs ``edge bench learning`` starts, here or on a cluster:

- unset: each environment's own default (in-process; ALFWorld in ``$EDGE_ALFWORLD_WORKERS`` processes);
- ``local``: in this process;
- ``processes``: in ``$EDGE_ENV_WORKERS`` worker processes of this machine (``parallel.EnvPool``);
- ``ray``: in ``$EDGE_ENV_WORKERS`` Ray actors of the cluster at ``$EDGE_RAY_ADDRESS`` (else
  ``$RAY_ADDRESS``, else a private Ray instance), each reserving ``$EDGE_ENV_ACTOR_CPUS`` CPUs and spread
  over the nodes (``ray_pool.RayEnvPool``).

The remote backends hand out :class:`~edge.envs.parallel.RemoteEnv` handles that speak the same
protocol; a worker (process or actor) builds the environment with its module's own ``make_env`` and the
same keyword arguments, in-process, so the same task and actions give the same observations wherever
it runs (``tests/test_ray.py`` compares them). Where environments run is not a parameter of the run
(``params.yaml`` holds what a run computes, and is hashed into its manifests): it is this variable.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from typing import Any

from edge.envs.base import TextEnv

BACKEND_VARIABLE = "EDGE_ENV_BACKEND"
WORKERS_VARIABLE = "EDGE_ENV_WORKERS"
ACTOR_CPUS_VARIABLE = "EDGE_ENV_ACTOR_CPUS"
BACKENDS = ("local", "processes", "ray")

_POOLS: dict[tuple[str, str], Any] = {}


def chosen_backend() -> str | None:
    """``$EDGE_ENV_BACKEND``, checked; None when unset (each environment's own default)."""
    backend = os.environ.get(BACKEND_VARIABLE, "").strip() or None
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"{BACKEND_VARIABLE}={backend!r}: expected one of {', '.join(BACKENDS)} (or unset)")
    return backend


def _number(variable: str, default: float, kind=int, minimum: float = 1) -> Any:
    raw = os.environ.get(variable)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{variable}={raw!r}: expected a {'whole ' if kind is int else ''}number") from None
    if value < minimum:
        raise ValueError(f"{variable}={raw!r}: expected {minimum:g} or more")
    return value


def pool_size() -> int:
    """Worker processes or actors per environment: ``$EDGE_ENV_WORKERS``, else the CPUs here, at most 4."""
    return _number(WORKERS_VARIABLE, min(4, os.cpu_count() or 1))


def build_in_process(module: str, **env_kwargs: Any) -> TextEnv:
    """In a worker: the environment itself, built by its module, never another pool (the worker is one)."""
    os.environ[BACKEND_VARIABLE] = "local"
    return importlib.import_module(module).make_env(**env_kwargs)


@functools.cache
def default_max_steps(module: str) -> int:
    """The step limit a module's ``make_env`` builds with when none is given (a handle needs it at once)."""
    parameter = inspect.signature(importlib.import_module(module).make_env).parameters.get("max_steps")
    if parameter is None or parameter.default is inspect.Parameter.empty:
        raise ValueError(f"{module}.make_env has no default max_steps: give max_steps to run it in workers")
    return parameter.default


def shared_pool(backend: str, name: str, module: str):
    """The pool of ``backend`` for environment ``name`` (module ``module``), started on first use."""
    pool = _POOLS.get((backend, module))
    if pool is None or pool.closed:
        factory = functools.partial(build_in_process, module)
        if backend == "processes":
            from edge.envs.parallel import EnvPool

            pool = EnvPool(name, factory, pool_size())
        else:
            from edge.envs.ray_pool import RayEnvPool
            from edge.ray_cluster import forwarded_environment

            pool = RayEnvPool(name, factory, pool_size(), cpus=_number(ACTOR_CPUS_VARIABLE, 1.0, float, minimum=0),
                              env_vars=forwarded_environment() | {BACKEND_VARIABLE: "local"})
        _POOLS[backend, module] = pool
    return pool


def make_env(name: str, module: str, backend: str, **env_kwargs: Any) -> TextEnv:
    """Environment ``name`` (built by ``module.make_env``) on ``backend``."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown environment backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "local":  # the module's own make_env (ALFWorld reads the variable and plays in-process)
        return importlib.import_module(module).make_env(**env_kwargs)
    max_steps = env_kwargs.pop("max_steps", None) or default_max_steps(module)
    return shared_pool(backend, name, module).env(max_steps, **env_kwargs)


def close_pools() -> None:
    """Stop every worker process and actor these backends started (they also stop when this process exits)."""
    for pool in _POOLS.values():
        pool.close()
    _POOLS.clear()
