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


def revisiting_trajectory(times: int = 3):
    """(trajectory, object kind, receptacle kind): a household task whose object shows only on arrival
    at its open receptacle, played going there ``times`` times (away to another receptacle between)."""
    from edge.envs.household import generate_tasks, make_env

    env = make_env()
    for task in generate_tasks("train", 60, seed=5):
        goal = task.spec["goal"]["object"]
        name, place = next((o, r) for o, r in task.spec["objects"] if o.startswith(goal + " "))
        if name not in env.reset(task).observation and name in env.step(f"go to {place}").observation:
            # Another kind of receptacle in between, so only the revisits of `place` can add sightings there.
            other = next(r for r in task.spec["receptacles"] if r.rsplit(" ", 1)[0] != place.rsplit(" ", 1)[0])
            actions = [f"go to {place}", f"go to {other}"] * times + ["look"]  # "look": records the last arrival
            return played(env, task, actions), goal, place.rsplit(" ", 1)[0]
    raise AssertionError("no task with its object on an open receptacle")
