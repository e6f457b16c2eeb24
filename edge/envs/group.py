"""Groups: G environments started from one identical initial state, the unit of group RL."""

from __future__ import annotations

from typing import Any

from edge.envs.base import Reset, Task, TextEnv
from edge.envs.parallel import reset_all
from edge.envs.registry import make_env


def make_groups(tasks: list[Task], size: int, **env_kwargs: Any) -> list[tuple[list[TextEnv], list[Reset]]]:
    """For every task, ``size`` environments of ``task.env`` reset to it.

    Because a task carries its whole initial state, the resets of one group are identical; a test
    checks it. All resets are sent at once, so environments in worker processes reset in parallel.
    """
    if size < 1:
        raise ValueError(f"group size must be at least 1, got {size}")
    envs = [make_env(task.env, **env_kwargs) for task in tasks for _ in range(size)]
    resets = reset_all(envs, [task for task in tasks for _ in range(size)])
    return [(envs[i:i + size], resets[i:i + size]) for i in range(0, len(envs), size)]


def make_group(task: Task, size: int, **env_kwargs: Any) -> tuple[list[TextEnv], list[Reset]]:
    """``size`` environments of ``task.env``, each reset to ``task``."""
    return make_groups([task], size, **env_kwargs)[0]
