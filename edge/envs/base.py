"""The one interface every text environment speaks, built-in or real.

An environment is reset to a :class:`Task` and then stepped with action strings. Tasks are plain,
JSON-serialisable records that carry the *whole* initial state, so resetting two environments to the
same task gives two identical episodes: that is what group RL (G rollouts from one initial state)
is built on.

Invalid actions are never raised: the environment answers the way the real benchmark does
("Nothing happens." in ALFWorld) and flags the step in ``info.invalid_action``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

SPLITS = ("train", "test_seen", "test_unseen")


@dataclass(frozen=True)
class Task:
    """One task: everything needed to rebuild its initial state, nothing else."""

    env: str
    """Name of the environment in the registry ("household", "shop", ...)."""
    split: str
    """One of ``SPLITS``."""
    task_id: str
    """Unique within the environment, stable across runs with the same seed."""
    task_type: str
    """Benchmark task family, e.g. ``pick_clean_then_place_in_recep`` or ``fashion``."""
    instruction: str
    """The goal as the agent reads it."""
    spec: dict[str, Any] = field(default_factory=dict)
    """Environment-specific initial state (room layout, goal, product id, ...); JSON only."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, record: dict[str, Any], source: str = "<record>") -> Task:
        missing = [k for k in ("env", "split", "task_id", "task_type", "instruction") if k not in record]
        if missing:
            raise ValueError(f"{source}: task record lacks field(s) {missing}; expected keys "
                             "env, split, task_id, task_type, instruction, spec")
        if record["split"] not in SPLITS:
            raise ValueError(f"{source}: split {record['split']!r} is not one of {list(SPLITS)}")
        return cls(env=record["env"], split=record["split"], task_id=record["task_id"],
                   task_type=record["task_type"], instruction=record["instruction"],
                   spec=dict(record.get("spec") or {}))


@dataclass
class StepInfo:
    """Side information of a step, the same keys for every environment."""

    won: bool = False
    """The task is solved (ALFWorld ``won``; WebShop reward == 1)."""
    score: float = 0.0
    """Graded score in [0, 1] (WebShop's reward; equals ``won`` for household tasks)."""
    invalid_action: bool = False
    """The action was not admissible and changed nothing."""
    admissible_actions: list[str] = field(default_factory=list)
    """What the agent may do next."""
    steps: int = 0
    """Steps taken so far in this episode."""
    truncated: bool = False
    """The episode ended because the step limit was reached."""


@dataclass
class Reset:
    observation: str
    instruction: str
    task_type: str
    admissible_actions: list[str]


@dataclass
class Step:
    observation: str
    reward: float
    done: bool
    info: StepInfo


@runtime_checkable
class TextEnv(Protocol):
    """A text environment instance; one episode at a time."""

    name: str
    max_steps: int

    def reset(self, task: Task) -> Reset: ...

    def step(self, action: str) -> Step: ...


class Agent(Protocol):
    """Anything that picks an action; scripted agents and (later) LM policies alike."""

    def reset(self, task: Task, first: Reset) -> None: ...

    def act(self, observation: str, admissible_actions: list[str]) -> str: ...


def check_can_step(task: Task | None, done: bool) -> None:
    """The protocol's two misuses of ``step``, refused with the same words by every environment."""
    if task is None:
        raise RuntimeError("call reset(task) before step()")
    if done:
        raise RuntimeError("episode is over; call reset(task) to start another")


def write_tasks(tasks: Iterable[Task], path: Path) -> int:
    """Write tasks as JSONL atomically (temporary name, then rename); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    n = 0
    with tmp.open("w") as fh:
        for task in tasks:
            fh.write(task.to_json() + "\n")
            n += 1
    tmp.replace(path)
    return n


def read_tasks(path: Path) -> list[Task]:
    """Read a JSONL task file; a bad line is an error naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"task file {path} does not exist; create it with `edge data prepare`")
    tasks = []
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            tasks.append(Task.from_dict(record, source=f"{path}:{lineno}"))
    return tasks
