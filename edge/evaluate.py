"""Held-out evaluation: success with and without experience, per task type, and retention."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from edge.envs.base import Task
from edge.envs.registry import knowledge
from edge.policy.actor import Actor
from edge.rollout import Experience, Trajectory, rollout


@dataclass
class EvalResult:
    episodes: int
    success: float
    """Share of episodes won (WebShop: reward exactly 1, the literature's success rate "SR")."""
    score: float
    """Mean final score in [0, 1] (WebShop's reward; equals success where the reward is 0 or 1)."""
    avg_score: float
    """``100 * score``: WebShop papers report this as "Score", next to the success rate."""
    mean_steps: float
    invalid_rate: float
    success_by_type: dict[str, float]
    """Success per task type, as ALFWorld papers report it (Pick, Look, Clean, Heat, Cool, Pick Two)."""
    episodes_by_type: dict[str, int] = field(default_factory=dict)
    won_by_task: dict[str, bool] = field(default_factory=dict)
    """Each task's outcome, by task id: two evaluations with the same seed pair task by task."""
    score_by_task: dict[str, float] = field(default_factory=dict)
    failures_by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    """Task type -> how its lost episodes failed, as the environment's failure reader names it
    (household: ``not_found``, ``no_transform``, ``not_placed``…) -> episodes; ``unread`` where the
    environment has no reader or it cannot say. Where a policy loses, not only how often."""

    def to_dict(self) -> dict:
        return asdict(self)


def failures_by_type(trajectories: list[Trajectory]) -> dict[str, dict[str, int]]:
    """Task type -> failure pattern (``Knowledge.read_failure``) -> how many lost episodes failed so."""
    counts: dict[str, Counter] = defaultdict(Counter)
    readers = {}
    for t in trajectories:
        if t.won:
            continue
        if t.task.env not in readers:
            found = knowledge(t.task.env)
            readers[t.task.env] = found if found.has("read_failure") else None
        read = readers[t.task.env].read_failure(t) if readers[t.task.env] is not None else None
        counts[t.task.task_type][read[0] if read else "unread"] += 1
    return {task_type: dict(sorted(c.items())) for task_type, c in sorted(counts.items())}


def summarise(trajectories: list[Trajectory]) -> EvalResult:
    n = len(trajectories)
    by_type: dict[str, list[bool]] = defaultdict(list)
    for t in trajectories:
        by_type[t.task.task_type].append(t.won)
    steps = sum(len(t.steps) for t in trajectories)
    score = sum(t.score for t in trajectories) / n
    return EvalResult(
        episodes=n, success=sum(t.won for t in trajectories) / n, score=score, avg_score=100 * score,
        mean_steps=steps / n, invalid_rate=sum(t.invalid_actions for t in trajectories) / max(steps, 1),
        success_by_type={k: sum(v) / len(v) for k, v in sorted(by_type.items())},
        episodes_by_type={k: len(v) for k, v in sorted(by_type.items())},
        won_by_task={t.task.task_id: t.won for t in trajectories},
        score_by_task={t.task.task_id: t.score for t in trajectories},
        failures_by_type=failures_by_type(trajectories),
    )


def evaluate(actor: Actor, tasks: list[Task], seed: int, *,
             experience_for: Callable[[Task], Experience | None] | None = None,
             retrieve_step: Callable[[Task, str], Experience | None] | None = None,
             follow_progress: bool = False,
             greedy: bool = False, chunk: int = 64, progress=None) -> EvalResult:
    """One episode per task; with ``experience_for`` every episode is conditioned on what it returns
    (and, with ``retrieve_step``, on what is retrieved again after each step; with ``follow_progress``,
    without the entries of the stages the episode has completed; see ``rollout``).

    Each task's episode has its own stream from (``seed``, task id): evaluations with the same seed
    are paired task by task, and a task with no experience replays its plain episode exactly."""
    trajectories: list[Trajectory] = []
    for start in range(0, len(tasks), chunk):
        part = tasks[start:start + chunk]
        experiences = None
        if experience_for is not None:
            experiences = {t.task_id: e for t in part if (e := experience_for(t)) is not None}
        trajectories += rollout(actor, part, 1, seed, experiences=experiences, conditioned_per_group=1,
                                retrieve_step=retrieve_step, follow_progress=follow_progress, greedy=greedy,
                                progress=progress)
    return summarise(trajectories)


def retention(success_without: float, success_with: float) -> float | None:
    """success without the bank / success with it; None when the scaffolded success is zero."""
    return success_without / success_with if success_with > 0 else None
