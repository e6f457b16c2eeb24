"""Scripted household agents: an expert that knows where everything is, and an explorer that
knows the rules and the goal but none of the object-location regularities; for the warm start, the
expert with detours and the explorer that follows advice."""

from __future__ import annotations

import random

from edge.envs.agents import RandomAgent
from edge.envs.base import Reset, Task
from edge.envs.household.tasks import TRANSFORM
from edge.envs.household.world import OPENABLE, kind_of


def expert_plan(task: Task) -> list[str]:
    """The action list that solves ``task``, read off its initial state (like ALFWorld's
    handcoded expert, which reads the PDDL state)."""
    spec, goal = task.spec, task.spec["goal"]
    where = {obj: loc for obj, loc in spec["objects"]}
    wanted = sorted((o for o in where if kind_of(o) == goal["object"]), key=lambda o: int(o.split()[-1]))
    first_of = {}
    for r in spec["receptacles"]:
        first_of.setdefault(kind_of(r), r)
    plan: list[str] = []
    at: list[str | None] = [None]
    opened: set[str] = set()

    def visit(receptacle: str) -> None:
        if at[0] != receptacle:
            plan.append(f"go to {receptacle}")
            at[0] = receptacle
        if kind_of(receptacle) in OPENABLE and receptacle not in opened:
            plan.append(f"open {receptacle}")
            opened.add(receptacle)

    for obj in wanted[: goal["count"]]:
        visit(where[obj])
        plan.append(f"take {obj} from {where[obj]}")
        if goal["type"] == "look_at_obj_in_light":
            lamp, lamp_at = spec["lamp"]
            visit(lamp_at)
            plan.append(f"use {lamp}")
            return plan
        verb = TRANSFORM.get(goal["type"])
        if verb:
            tool = first_of[goal["tool"]]
            if at[0] != tool:
                plan.append(f"go to {tool}")
                at[0] = tool
            plan.append(f"{verb} {obj} with {tool}")
        target = first_of[goal["target"]]
        visit(target)
        plan.append(f"put {obj} in/on {target}")
    return plan


class ExpertAgent:
    """Follows :func:`expert_plan`; solves every household task."""

    def __init__(self, seed: int = 0):
        self.plan: list[str] = []

    def reset(self, task: Task, first: Reset) -> None:
        self.plan = expert_plan(task)

    def act(self, observation: str, admissible_actions: list[str]) -> str:
        return self.plan.pop(0) if self.plan else "look"


class ExploreAgent:
    """Searches receptacles in a random order, opening what is closed, until it sees what the goal
    needs; then transforms and places it. Knows the goal and the rules, not where things lie."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def reset(self, task: Task, first: Reset) -> None:
        self.goal = task.spec["goal"]
        self.receptacles = list(task.spec["receptacles"])
        self.unvisited: list[str] = []
        self.here: str | None = None
        self.holding: str | None = None
        self.transformed: set[str] = set()
        self.placed: set[str] = set()

    def _go(self, receptacle: str) -> str:
        self.here = receptacle
        return f"go to {receptacle}"

    def _explore(self) -> str:
        while self.unvisited and self.unvisited[-1] == self.here:
            self.unvisited.pop()
        if not self.unvisited:
            self.unvisited = self._search_order([r for r in self.receptacles if r != self.here])
        return self._go(self.unvisited.pop())

    def _search_order(self, receptacles: list[str]) -> list[str]:
        """A stack of receptacles to visit (last first): random, since it knows no regularities."""
        self.rng.shuffle(receptacles)
        return receptacles

    def _first(self, kind: str) -> str:
        return next(r for r in self.receptacles if kind_of(r) == kind)

    def act(self, observation: str, admissible_actions: list[str]) -> str:
        actions = set(admissible_actions)
        here = self.here
        if here is not None and f"open {here}" in actions:
            return f"open {here}"
        goal = self.goal
        if self.holding is None:
            for action in admissible_actions:
                if action.startswith("take "):
                    obj = action[5:].split(" from ")[0]
                    if kind_of(obj) == goal["object"] and obj not in self.placed:
                        self.holding = obj
                        return action
            return self._explore()
        obj = self.holding
        if goal["type"] == "look_at_obj_in_light":
            lamp = next((a for a in admissible_actions if a.startswith("use ")), None)
            return lamp or self._explore()
        verb = TRANSFORM.get(goal["type"])
        if verb and obj not in self.transformed:
            tool = self._first(goal["tool"])
            if here != tool:
                return self._go(tool)
            self.transformed.add(obj)
            return f"{verb} {obj} with {tool}"
        target = self._first(goal["target"])
        if here != target:
            return self._go(target)
        self.placed.add(obj)
        self.holding = None
        return f"put {obj} in/on {target}"


class AdvisedExplorer(ExploreAgent):
    """The explorer, but it searches the receptacle kinds the advice names first, in that order."""

    def __init__(self, seed: int, advised_kinds: list[str]):
        super().__init__(seed)
        self.advised_kinds = advised_kinds

    def _search_order(self, receptacles: list[str]) -> list[str]:
        self.rng.shuffle(receptacles)
        rank = {k: i for i, k in enumerate(self.advised_kinds)}
        # A stack: the last item is visited first, so the first advised kind goes to the end.
        return sorted(receptacles, key=lambda r: -rank.get(kind_of(r), len(rank)))


class NoisyExpert:
    """The expert's plan with random detours ("go to" somewhere else), each followed by a return."""

    def __init__(self, seed: int, detour_prob: float):
        self.rng = random.Random(seed)
        self.detour_prob = detour_prob

    def reset(self, task: Task, first) -> None:
        self.plan = expert_plan(task)
        self.receptacles = task.spec["receptacles"]
        self.at: str | None = None
        self.returning: str | None = None

    def act(self, observation: str, admissible: list[str]) -> str:
        if self.returning:
            action, self.returning = f"go to {self.returning}", None
            return action
        if self.at is not None and self.plan and not self.plan[0].startswith("go to ") \
                and self.rng.random() < self.detour_prob:
            detour = self.rng.choice([r for r in self.receptacles if r != self.at])
            self.returning = self.at
            return f"go to {detour}"
        action = self.plan.pop(0) if self.plan else "look"
        if action.startswith("go to "):
            self.at = action[len("go to "):]
        return action


AGENTS = {"expert": ExpertAgent, "explore": ExploreAgent, "random": RandomAgent}
