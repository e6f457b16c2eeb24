"""Agents that need no knowledge of any environment."""

from __future__ import annotations

import random

from edge.envs.base import Reset, Task


class RandomAgent:
    """Picks uniformly among the admissible actions: the floor every method must beat."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def reset(self, task: Task, first: Reset) -> None:
        pass

    def act(self, observation: str, admissible_actions: list[str]) -> str:
        return self.rng.choice(admissible_actions)
