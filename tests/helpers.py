"""Small builders the tests share."""

from __future__ import annotations

from edge.envs.base import Task
from edge.policy.actor import Decision
from edge.rollout import StepRecord, Trajectory


def played(env, task: Task, actions: list[str]) -> Trajectory:
    """A plain trajectory of ``actions`` from ``task``'s start (stops when the episode ends); the
    decisions carry no model outputs, which is all that synthesis and credit read."""
    first = env.reset(task)
    trajectory = Trajectory(f"{task.task_id}/m0", task, task.task_id, 0, False, None)
    observation, admissible = first.observation, first.admissible_actions
    for action in actions:
        trajectory.steps.append(StepRecord(observation, admissible, Decision(action, [], None, -1, None, [0.0])))
        out = env.step(action)
        observation, admissible = out.observation, out.info.admissible_actions
        trajectory.won, trajectory.score, trajectory.reward = out.info.won, out.info.score, out.info.score
        if out.done:
            break
    return trajectory
