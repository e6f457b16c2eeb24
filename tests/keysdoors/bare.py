"""keysdoors with nothing beyond reset/step: no KNOWLEDGE, no expert (the tests' environment that
lacks every optional part)."""

import dataclasses

from edge.envs.agents import RandomAgent
from keysdoors import game
from keysdoors.game import make_env, vocabulary

AGENTS = {"random": RandomAgent}


def generate_tasks(split: str, n: int, seed: int):
    return [dataclasses.replace(t, env="keysdoors-bare") for t in game.generate_tasks(split, n, seed)]


__all__ = ["AGENTS", "generate_tasks", "make_env", "vocabulary"]
