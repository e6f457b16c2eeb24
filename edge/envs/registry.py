"""Environments found by name.

Each entry says how to build an environment, how to generate its tasks from a seed, and which
scripted agents it ships. Entries import their module lazily, so asking for ``household`` never
imports a real benchmark's heavy dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edge.envs.base import SPLITS, Agent, Task, TextEnv


@dataclass(frozen=True)
class EnvEntry:
    name: str
    module: str
    """Module that defines ``make_env``, ``generate_tasks`` and ``AGENTS`` (and ``SPLITS`` when it
    has fewer than the protocol's three)."""
    description: str

    def load(self):
        return importlib.import_module(self.module)


_REGISTRY: dict[str, EnvEntry] = {}


def register(name: str, module: str, description: str) -> None:
    _REGISTRY[name] = EnvEntry(name, module, description)


register("household", "edge.envs.household", "mini-ALFWorld: six household task types, 2.1.1 wording")
register("shop", "edge.envs.shop", "mini-WebShop: search and click in a generated catalog")
register("webshop", "edge.envs.webshop", "WebShop on its own data files (folder from $WEBSHOP_DATA)")
register("alfworld", "edge.envs.alfworld",
         "ALFWorld 0.4.2 text games (extra edge-rl[alfworld], data in $ALFWORLD_DATA), in worker processes")


def env_names() -> list[str]:
    return sorted(_REGISTRY)


def get_entry(name: str) -> EnvEntry:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown environment {name!r}; valid names: {', '.join(env_names())}") from None


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    return split


def env_splits(name: str) -> tuple[str, ...]:
    """The splits an environment has: all of ``SPLITS`` unless its module says fewer (WebShop has no
    ``test_unseen``)."""
    return tuple(getattr(get_entry(name).load(), "SPLITS", SPLITS))


def make_env(name: str, **kwargs: Any) -> TextEnv:
    """Build one environment instance by registry name."""
    return get_entry(name).load().make_env(**kwargs)


def generate_tasks(name: str, split: str, n: int, seed: int) -> list[Task]:
    """The first ``n`` tasks of ``split`` for ``seed``; the same arguments give the same tasks."""
    check_split(split)
    if split not in env_splits(name):
        raise ValueError(f"environment {name!r} has no split {split!r}; its splits: {', '.join(env_splits(name))}")
    if n < 1:
        raise ValueError(f"number of tasks must be at least 1, got {n}")
    return get_entry(name).load().generate_tasks(split, n, seed)


def agent_names(name: str) -> list[str]:
    return sorted(get_entry(name).load().AGENTS)


def make_agent(env_name: str, agent: str, seed: int) -> Agent:
    """A scripted agent ("expert", "random", "explore", ...) for an environment."""
    agents: dict[str, Callable[[int], Agent]] = get_entry(env_name).load().AGENTS
    if agent not in agents:
        raise ValueError(f"environment {env_name!r} has no agent {agent!r}; valid agents: "
                         f"{', '.join(sorted(agents))}")
    return agents[agent](seed)
