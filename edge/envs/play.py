"""Run scripted agents through an environment and summarise: the engine of `edge env play`."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from edge.envs.base import Agent, Task, TextEnv
from edge.envs.parallel import reset_all, step_all
from edge.envs.registry import generate_tasks, make_agent, make_env


@dataclass
class Episode:
    task_id: str
    task_type: str
    won: bool
    score: float
    steps: int
    invalid_actions: int
    env_seconds: float
    """Time spent inside the environment's reset and step calls."""
    transcript: list[str] = field(default_factory=list)


@dataclass
class PlayReport:
    env: str
    split: str
    policy: str
    seed: int
    episodes: int
    success_rate: float
    mean_reward: float
    mean_steps: float
    invalid_action_rate: float
    env_steps_per_second: float
    """Environment steps per second of time spent inside the environment (agent time excluded); with
    environments in worker processes, per second of wall time spent waiting for them."""
    success_by_type: dict[str, float]
    episodes_by_type: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def play_episode(env: TextEnv, agent: Agent, task: Task, record: bool = False) -> Episode:
    started = time.perf_counter()
    first = env.reset(task)
    env_seconds = time.perf_counter() - started
    agent.reset(task, first)
    observation, admissible = first.observation, first.admissible_actions
    transcript = [observation, f"admissible: {admissible}"] if record else []
    won, score, steps, invalid = False, 0.0, 0, 0
    done = False
    while not done:
        action = agent.act(observation, admissible)
        started = time.perf_counter()
        result = env.step(action)
        env_seconds += time.perf_counter() - started
        observation, admissible, done = result.observation, result.info.admissible_actions, result.done
        steps, won, score = result.info.steps, result.info.won, result.info.score
        invalid += result.info.invalid_action
        if record:
            transcript += [f"> {action}", observation]
    return Episode(task.task_id, task.task_type, won, score, steps, invalid, env_seconds, transcript)


def summarise(env_name: str, split: str, policy: str, seed: int, episodes: list[Episode]) -> PlayReport:
    n = len(episodes)
    by_type: dict[str, list[bool]] = defaultdict(list)
    for ep in episodes:
        by_type[ep.task_type].append(ep.won)
    total_steps = sum(ep.steps for ep in episodes)
    env_time = sum(ep.env_seconds for ep in episodes)
    return PlayReport(
        env=env_name, split=split, policy=policy, seed=seed, episodes=n,
        success_rate=sum(ep.won for ep in episodes) / n,
        mean_reward=sum(ep.score for ep in episodes) / n,
        mean_steps=total_steps / n,
        invalid_action_rate=sum(ep.invalid_actions for ep in episodes) / max(total_steps, 1),
        env_steps_per_second=total_steps / env_time if env_time > 0 else float("inf"),
        success_by_type={t: sum(w) / len(w) for t, w in sorted(by_type.items())},
        episodes_by_type={t: len(w) for t, w in sorted(by_type.items())},
    )


def play_all(envs: list[TextEnv], agents: list[Agent], tasks: list[Task], progress=None) -> list[Episode]:
    """Play ``tasks[i]`` in ``envs[i]`` with ``agents[i]``, all episodes in lockstep, so environments
    in worker processes (``edge.envs.parallel``) reset and step concurrently. Each batched call's
    time is shared equally among the episodes it advanced."""
    started = time.perf_counter()
    firsts = reset_all(envs, tasks)
    reset_share = (time.perf_counter() - started) / max(len(tasks), 1)
    episodes = [Episode(task.task_id, task.task_type, False, 0.0, 0, 0, reset_share) for task in tasks]
    observations = [first.observation for first in firsts]
    admissible = [first.admissible_actions for first in firsts]
    for agent, task, first in zip(agents, tasks, firsts):
        agent.reset(task, first)
    active = list(range(len(tasks)))
    while active:
        actions = [agents[i].act(observations[i], admissible[i]) for i in active]
        started = time.perf_counter()
        results = step_all([envs[i] for i in active], actions)
        share = (time.perf_counter() - started) / len(active)
        still = []
        for i, result in zip(active, results):
            ep = episodes[i]
            ep.env_seconds += share
            ep.steps, ep.won, ep.score = result.info.steps, result.info.won, result.info.score
            ep.invalid_actions += result.info.invalid_action
            observations[i], admissible[i] = result.observation, result.info.admissible_actions
            if result.done:
                if progress is not None:
                    progress.update(1)
            else:
                still.append(i)
        active = still
    return episodes


def play(env_name: str, split: str, policy: str, episodes: int, seed: int,
         progress: bool = False) -> tuple[PlayReport, list[Episode]]:
    """Play ``episodes`` tasks of ``split`` (generated from ``seed``) with a scripted agent, one
    environment and one agent (seeded ``seed + i``) per episode, all in lockstep."""
    tasks = generate_tasks(env_name, split, episodes, seed)
    envs = [make_env(env_name) for _ in tasks]
    agents = [make_agent(env_name, policy, seed + i) for i in range(len(tasks))]
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(tasks), desc=f"{env_name}/{split}/{policy}", unit="ep", leave=False)
    try:
        results = play_all(envs, agents, tasks, bar)
    finally:
        if bar is not None:
            bar.close()
    return summarise(env_name, split, policy, seed, results), results
