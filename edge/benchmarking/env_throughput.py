"""Environment steps per second, inside ``reset``/``step`` and end to end with a scripted agent."""

from __future__ import annotations

import time


def measure_env(env_name: str, agent_name: str, episodes: int, seed: int) -> dict:
    """Steps per second inside the environment (``reset`` + ``step``) and end to end with the agent."""
    from edge.envs.play import play_episode
    from edge.envs.registry import generate_tasks, make_agent, make_env

    tasks = generate_tasks(env_name, "train", episodes, seed)
    env, agent = make_env(env_name), make_agent(env_name, agent_name, seed)
    play_episode(env, agent, tasks[0])  # imports, search index and caches outside the clock
    started = time.perf_counter()
    results = [play_episode(env, agent, task) for task in tasks]
    wall = time.perf_counter() - started
    steps = sum(r.steps for r in results)
    env_seconds = sum(r.env_seconds for r in results)
    return {"env": env_name, "agent": agent_name, "episodes": episodes, "steps": steps,
            "env_steps_per_second": steps / env_seconds, "end_to_end_steps_per_second": steps / wall,
            "success_rate": sum(r.won for r in results) / episodes}
