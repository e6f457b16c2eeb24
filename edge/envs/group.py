"""Groups: G environments started from one identical initial state, the unit of group RL."""

from __future__ import annotations

from typing import Any

from edge.envs.base import Reset, Task, TextEnv
from edge.envs.registry import make_env


def make_group(task: Task, size: int, **env_kwargs: Any) -> tuple[list[TextEnv], list[Reset]]:
    """Build ``size`` environments of ``task.env`` and reset each to ``task``.

    Because a task carries its whole initial state, the resets are identical; a test checks it.
    """
    if size < 1:
        raise ValueError(f"group size must be at least 1, got {size}")
    envs = [make_env(task.env, **env_kwargs) for _ in range(size)]
    return envs, [env.reset(task) for env in envs]
