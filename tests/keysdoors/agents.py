"""Scripted agents: an expert that reads the key's place off the task, and the shared random agent."""

from __future__ import annotations

from edge.envs.agents import RandomAgent
from edge.envs.base import Reset, Task


class ExpertAgent:
    def __init__(self, seed: int = 0):
        self.plan: list[str] = []

    def reset(self, task: Task, first: Reset) -> None:
        colour = task.spec["colour"]
        home = next(place for c, place in task.spec["keys"] if c == colour)
        self.plan = [f"go to {home}", f"take {colour} key from {home}", f"go to {colour} door",
                     f"unlock {colour} door with {colour} key"]
        if task.task_type == "unlock_open":
            self.plan.append(f"open {colour} door")

    def act(self, observation: str, admissible_actions: list[str]) -> str:
        return self.plan.pop(0) if self.plan else "look"


AGENTS = {"expert": ExpertAgent, "random": RandomAgent}
