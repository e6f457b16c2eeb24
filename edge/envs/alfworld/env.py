"""One ALFWorld text game at a time, through the protocol every EDGE environment speaks.

A game is played as ``AlfredTWEnv`` plays it: TextWorld's PDDL backend wrapped in alfworld's own
``AlfredDemangler`` (object ids -> "apple 1") and ``AlfredInfos``; the handcoded expert
(``HandCodedTWAgent``) is driven as alfworld's ``AlfredExpert`` wrapper drives it. Built here for
one game file at a time rather than through ``AlfredTWEnv.init_env``, whose gym batch
cycles through its games in its own order: group RL needs G copies of one chosen game.

An inadmissible action gets the game's own answer, "Nothing happens.", without a round trip into
TextWorld (which would answer the same and change nothing, at 0.1 s a step).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from edge.envs.alfworld.data import data_root, require_extra
from edge.envs.alfworld.grammar import as_move, normalise_action
from edge.envs.base import Reset, Step, StepInfo, Task, check_can_step

NOTHING_HAPPENS = "Nothing happens."
DEFAULT_MAX_STEPS = 50
"""The step limit of ALFWorld evaluations (``max_nb_steps_per_episode``) in the literature."""


def _textworld_env(facts: bool = False, policy_commands: bool = False) -> Any:
    """TextWorld's generic environment with alfworld's wrappers, as ``AlfredTWEnv.init_env`` stacks
    them (no ``Limit``: the step limit is counted here). ``facts``: also return the game's PDDL
    facts, which the handcoded expert decides from; ``policy_commands``: the PDDL planner's plan.
    Both cost time at every step, so only the scripted experts ask for them."""
    require_extra()
    data_root()  # exports ALFWORLD_DATA before alfworld is imported
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs.wrappers import Filter, GenericEnvironment

    infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=facts, policy_commands=policy_commands,
                               extras=["gamefile"])
    env = GenericEnvironment(infos)
    for wrapper in (AlfredDemangler(shuffle=False), AlfredInfos, Filter):
        env = wrapper(env)
    return env


def game_path(root: Path, task: Task) -> Path:
    if task.env != "alfworld":
        raise ValueError(f"task {task.task_id} is for environment {task.env!r}, not 'alfworld'")
    relative = task.spec.get("game")
    if not relative:
        raise ValueError(f"task {task.task_id}: spec has no 'game' (the game file relative to the data folder)")
    path = root / relative
    if not path.is_file():
        raise FileNotFoundError(f"task {task.task_id}: game file {path} does not exist; is ALFWORLD_DATA "
                                f"({root}) the folder its task file was written for?")
    return path


class AlfworldEnv:
    """One ALFWorld game at a time; see ``edge.envs.base.TextEnv``."""

    name = "alfworld"

    def __init__(self, data: str | Path | None = None, max_steps: int = DEFAULT_MAX_STEPS):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.root = data_root(data)
        self.max_steps = max_steps
        self._game = _textworld_env()
        self.task: Task | None = None

    def reset(self, task: Task) -> Reset:
        self._game.load(str(game_path(self.root, task)))
        observation, infos = self._game.reset()
        self.task = task
        self.steps = 0
        self.done = False
        self._admissible = list(infos["admissible_commands"])
        return Reset(observation, task.instruction, task.task_type, list(self._admissible))

    def step(self, action: str) -> Step:
        check_can_step(self.task, self.done)
        self.steps += 1
        command = normalise_action(action, self._admissible)
        invalid = command not in self._admissible
        won = False
        if invalid:
            observation = NOTHING_HAPPENS
        else:
            observation, _, _, infos = self._game.step(command)
            won = bool(infos["won"])
            self._admissible = list(infos["admissible_commands"])
        truncated = not won and self.steps >= self.max_steps
        self.done = won or truncated
        info = StepInfo(won=won, score=float(won), invalid_action=invalid,
                        admissible_actions=list(self._admissible), steps=self.steps, truncated=truncated)
        return Step(observation, float(won), self.done, info)


def expert_plan(task: Task, data: str | Path | None = None, max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """The handcoded expert's actions for ``task``, found by playing the game once with it.

    Driven as alfworld's ``AlfredExpert`` wrapper drives it (its next action is what that wrapper
    puts in ``infos["extra.expert_plan"]``; an inadmissible suggestion becomes "look"), with one
    difference: alfworld 0.4.2's expert reads and writes the newer grammar ("move X to Y") and so
    can never place an object in 2.1.1 games ("put X in/on Y"), so it is shown the admissible
    commands in its grammar and its placing commands are written back into the game's. It also
    skips the wrapper's opening "look", which would spend one of the 50 steps.

    The expert breaks ties with Python's global ``random``; it is seeded from the task id (and
    restored afterwards), so a task always gets the same plan. The games are deterministic, so
    replaying the plan in a fresh copy retraces the episode. A plan that does not win within
    ``max_steps`` actions is returned as far as it got."""
    require_extra()
    root = data_root(data)
    from alfworld.agents.expert import HandCodedAgentFailed, HandCodedAgentTimeout, HandCodedTWAgent

    path = game_path(root, task)
    game = _textworld_env(facts=True)
    game.load(str(path))
    observation, infos = game.reset()
    expert = HandCodedTWAgent(max_steps=max_steps + 1)
    expert.reset(str(path))
    saved = random.getstate()
    random.seed(task.task_id)
    plan: list[str] = []
    last = ""
    try:
        while len(plan) < max_steps:
            admissible = list(infos["admissible_commands"])
            view = {"feedback": observation, "admissible_commands": [as_move(c) for c in admissible],
                    "facts": infos["facts"], "won": infos["won"]}
            try:
                suggestion = expert.act(view, 0, infos["won"], last)
            except (HandCodedAgentTimeout, HandCodedAgentFailed):
                break
            command = normalise_action(suggestion, admissible)
            last = command if command in admissible else "look"
            plan.append(last)
            observation, _, _, infos = game.step(last)
            if infos["won"]:
                break
    finally:
        random.setstate(saved)
    return plan


def planner_plan(task: Task, data: str | Path | None = None) -> list[str]:
    """The PDDL planner's plan for ``task`` (fast-downward, through TextWorld's ``policy_commands``;
    alfworld's "planner" expert): a shortest solution read off the full initial state, where the
    handcoded expert has to search for objects."""
    root = data_root(data)
    game = _textworld_env(policy_commands=True)
    game.load(str(game_path(root, task)))
    _, infos = game.reset()
    return list(infos["policy_commands"] or [])
