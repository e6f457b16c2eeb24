"""Scripted ALFWorld agents: alfworld's two experts, and the random floor.

- ``expert``: alfworld's "planner" expert, fast-downward's plan from the full initial state: the
  shortest solution, like the household and shop experts, which also read the task's initial state.
  It solves every solvable game within the step limit.
- ``handcoded``: ALFWorld's handcoded expert (``HandCodedTWAgent``, what ``AlfredExpert`` puts in
  ``infos["extra.expert_plan"]``, the teacher of ALFWorld's DAgger agents). It searches receptacles
  in a fixed order of likely places until it sees what it needs, so it can run past the 50-step
  limit on a few games (one of the first 20 ``test_unseen`` games for seed 0).

Both decide from the game's PDDL state, which an agent here does not see, so they ask for the whole
plan when an episode starts (``edge.envs.alfworld.env``: one private playthrough for the handcoded
expert, one planner call for the other) and then replay it. When environments run in worker
processes the plans are computed there, several at once.
"""

from __future__ import annotations

from edge.envs.agents import RandomAgent
from edge.envs.base import Reset, Task


class HandcodedAgent:
    """Replays the handcoded expert's plan for the task; "look" once the plan is used up."""

    kind = "handcoded"

    def __init__(self, seed: int = 0):
        self._pending = None
        self.plan: list[str] = []

    def reset(self, task: Task, first: Reset) -> None:
        from edge.envs.alfworld import plan_request

        self._pending = plan_request(task, self.kind)
        self.plan = []

    def act(self, observation: str, admissible_actions: list[str]) -> str:
        if self._pending is not None:
            self.plan, self._pending = list(self._pending.result()), None
        return self.plan.pop(0) if self.plan else "look"


class PlannerAgent(HandcodedAgent):
    """Replays the PDDL planner's (shortest) plan for the task."""

    kind = "planner"


AGENTS = {"expert": PlannerAgent, "handcoded": HandcodedAgent, "random": RandomAgent}
