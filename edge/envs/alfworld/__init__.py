"""``alfworld``: the real ALFWorld text games (alfworld 0.4.2, optional extra ``edge-rl[alfworld]``).

The modules: ``data`` (where the games are, splits, Task records), ``grammar`` (both wordings of
placing an object), ``env`` (one game through the EDGE protocol; the handcoded expert's and the
planner's plans), ``agents``, ``vocab`` (words for the tiny model's tokenizer) and ``fetch``
(``edge data alfworld``); its knowledge is household's room knowledge (same goals, same wording;
no oracle, no scripted demonstrators). Nothing here imports ``alfworld`` until a game is needed, so the registry
can list this environment on a machine without the extra.

Environments run in worker processes by default (a step takes about 0.1 s, a reset 1-2 s): each
:func:`make_env` returns a handle into a pool of ``$EDGE_ALFWORLD_WORKERS`` processes (default: the
number of CPUs, at most 4), shared by every environment of the same data folder.
``make_env(workers=0)`` plays in this process instead.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from edge.envs.alfworld.agents import AGENTS, HandcodedAgent, PlannerAgent
from edge.envs.alfworld.data import TASK_TYPES, AlfworldUnavailable, data_root, generate_tasks, require_extra
from edge.envs.alfworld.env import DEFAULT_MAX_STEPS, AlfworldEnv, expert_plan, planner_plan
from edge.envs.alfworld.grammar import normalise_action
from edge.envs.alfworld.vocab import vocabulary
from edge.envs.base import Task, TextEnv
from edge.envs.household.knowledge import RoomKnowledge
from edge.envs.parallel import EnvPool

DESCRIPTION = "ALFWorld 0.4.2 text games (extra edge-rl[alfworld], data in $ALFWORLD_DATA), in worker processes"

__all__ = ["AGENTS", "DESCRIPTION", "KNOWLEDGE", "AlfworldEnv", "AlfworldUnavailable", "HandcodedAgent",
           "PlannerAgent", "TASK_TYPES",
           "expert_plan", "generate_tasks", "make_env", "normalise_action", "plan_request", "planner_plan",
           "vocabulary"]

KNOWLEDGE = RoomKnowledge()

WORKERS_VARIABLE = "EDGE_ALFWORLD_WORKERS"

_POOLS: dict[Path, EnvPool] = {}


def default_workers() -> int:
    # EDGE_ENV_BACKEND=local (also what a worker process or Ray actor of edge.envs.backends runs under):
    # play here, not in another pool.
    if os.environ.get("EDGE_ENV_BACKEND", "").strip() == "local":
        return 0
    raw = os.environ.get(WORKERS_VARIABLE)
    if raw is None:
        return min(4, os.cpu_count() or 1)
    try:
        workers = int(raw)
    except ValueError:
        raise ValueError(f"{WORKERS_VARIABLE}={raw!r}: expected a whole number of worker processes (0: none)") from None
    if workers < 0:
        raise ValueError(f"{WORKERS_VARIABLE}={raw!r}: expected 0 or more worker processes")
    return workers


def shared_pool(root: Path, workers: int) -> EnvPool:
    """The pool of the data folder ``root``, started on first use with ``workers`` processes."""
    pool = _POOLS.get(root)
    if pool is None or pool.closed:
        pool = _POOLS[root] = EnvPool("alfworld", functools.partial(AlfworldEnv, data=str(root)), workers)
    return pool


def close_pools() -> None:
    """Stop every worker process (they also stop when this process exits)."""
    for pool in _POOLS.values():
        pool.close()
    _POOLS.clear()


def make_env(max_steps: int = DEFAULT_MAX_STEPS, data: str | Path | None = None,
             workers: int | None = None) -> TextEnv:
    """An ALFWorld environment: a handle into the shared worker pool, or in-process with ``workers=0``.

    Missing extra or data folder: :class:`AlfworldUnavailable`, saying how to fix it."""
    require_extra()
    root = data_root(data)
    workers = default_workers() if workers is None else workers
    if workers == 0:
        return AlfworldEnv(root, max_steps=max_steps)
    return shared_pool(root, workers).env(max_steps)


class _Done:
    """An already computed value with the same ``result()`` as a worker's reply."""

    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value


PLANNERS = {"handcoded": expert_plan, "planner": planner_plan}


def plan_request(task: Task, kind: str = "handcoded", data: str | Path | None = None):
    """Ask for a scripted expert's plan of ``task`` (``kind``: "handcoded" or "planner"), computed in
    a worker of the shared pool when environments run in workers (so several plans are made at once),
    else here, now. Returns something whose ``result()`` is the plan."""
    if kind not in PLANNERS:
        raise ValueError(f"unknown expert {kind!r}; valid: {', '.join(PLANNERS)}")
    root = data_root(data)
    workers = default_workers()
    if workers == 0:
        return _Done(PLANNERS[kind](task, root))
    return shared_pool(root, workers).call(PLANNERS[kind], task, str(root))
