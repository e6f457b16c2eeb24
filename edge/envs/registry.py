"""Environments found by name, through the ``edge.envs`` entry-point group.

An installed package adds an environment to every command, the flow and the worker processes by
declaring, in its ``pyproject.toml``::

    [project.entry-points."edge.envs"]
    keysdoors = "keysdoors"

The value is a module that defines ``make_env``, ``generate_tasks`` and ``AGENTS`` (and optionally
``SPLITS``, ``DESCRIPTION``, ``vocabulary()`` and ``KNOWLEDGE``; see ``docs/ENVIRONMENTS.md``). The
built-in environments are declared the same way in this project's ``pyproject.toml``. Entries import
their module lazily, so listing environments never imports a real benchmark's heavy dependencies.
:func:`register` adds one at run time (a notebook, a test).
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from edge.envs.base import SPLITS, Agent, Knowledge, Task, TextEnv

ENTRY_POINT_GROUP = "edge.envs"
BUILTIN = {"household": "edge.envs.household", "household_moved": "edge.envs.household_moved",
           "household_shuffled": "edge.envs.household_shuffled", "shop": "edge.envs.shop",
           "webshop": "edge.envs.webshop", "alfworld": "edge.envs.alfworld"}
"""What this project's own entry points declare; registered directly for a name no entry point declares
(a source tree that was never installed has no entry points to read)."""
RUNTIME = "registered at run time"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvEntry:
    name: str
    module: str
    """Module that defines ``make_env``, ``generate_tasks`` and ``AGENTS``."""
    source: str = RUNTIME
    """Where the entry came from: the distribution that declared it, or a run-time ``register``."""

    def load(self):
        try:
            return importlib.import_module(self.module)
        except ImportError as err:
            raise ValueError(f"environment {self.name!r} ({self.source}) names module {self.module!r}, "
                             f"which does not import: {err}") from err

    @property
    def description(self) -> str:
        """The module's ``DESCRIPTION``, else the first line of its docstring."""
        try:
            module = self.load()
        except ValueError as err:
            return f"(cannot be loaded: {err.__cause__})"
        text = getattr(module, "DESCRIPTION", None) or (module.__doc__ or "").strip().split("\n")[0]
        return text.strip()


_REGISTRY: dict[str, EnvEntry] = {}
_DISCOVERED = False
# Threads of one process read the registry at once (the learning benchmark builds warm starts and
# loads params.yaml in a thread per job): the entry points are read under this lock into a new
# table that replaces the old one whole, so no reader sees it half filled (session 25 saw
# "unknown environment(s) ['shop']; valid names: []" from exactly that).
_LOCK = threading.RLock()


def register(name: str, module: str) -> None:
    """Add (or replace) an environment for this process."""
    _discover()
    with _LOCK:
        _REGISTRY[name] = EnvEntry(name, module, RUNTIME)


def unregister(name: str) -> None:
    """Forget an environment :func:`register` added."""
    with _LOCK:
        if name in _REGISTRY and _REGISTRY[name].source == RUNTIME:
            del _REGISTRY[name]


def discover(refresh: bool = False) -> None:
    """Read the entry-point group (once per process unless ``refresh``: after installing a package,
    or putting one on ``sys.path``, without restarting)."""
    global _DISCOVERED
    with _LOCK:
        if refresh:
            _DISCOVERED = False
        _discover()


def _discover() -> None:
    global _DISCOVERED, _REGISTRY
    if _DISCOVERED:
        return
    with _LOCK:
        if _DISCOVERED:  # another thread read them while this one waited
            return
        table = {n: e for n, e in _REGISTRY.items() if e.source == RUNTIME}  # read afresh; keep register()'s
        for point in entry_points(group=ENTRY_POINT_GROUP):
            declared_by = f"entry point of {point.dist.name}" if point.dist else "entry point"
            if point.name in table and table[point.name].module != point.value:  # two packages, one name
                log.warning("environment %r is declared twice (%s and %s); using %s", point.name,
                            table[point.name].source, declared_by, point.value)
            table[point.name] = EnvEntry(point.name, point.value, declared_by)
        for name, module in BUILTIN.items():
            table.setdefault(name, EnvEntry(name, module, "built in (this source tree is not installed)"))
        _REGISTRY = table
        _DISCOVERED = True


def env_names() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def get_entry(name: str) -> EnvEntry:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown environment {name!r}; valid names: {', '.join(env_names())} (an installed "
                         f"package adds one through the {ENTRY_POINT_GROUP!r} entry-point group)") from None


def knowledge(name: str) -> Knowledge:
    """What environment ``name`` knows beyond reset/step (its module's ``KNOWLEDGE``; none: an empty
    :class:`Knowledge`, which has no part)."""
    found = getattr(get_entry(name).load(), "KNOWLEDGE", None)
    if found is None:
        return Knowledge()
    if not isinstance(found, Knowledge):
        raise ValueError(f"environment {name!r}: KNOWLEDGE must be an edge.envs.base.Knowledge, "
                         f"got {type(found).__name__}")
    return found


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    return split


def env_splits(name: str) -> tuple[str, ...]:
    """The splits an environment has: all of ``SPLITS`` unless its module says fewer (WebShop has no
    ``test_unseen``)."""
    return tuple(getattr(get_entry(name).load(), "SPLITS", SPLITS))


def make_env(name: str, **kwargs: Any) -> TextEnv:
    """Build one environment instance by registry name, where ``$EDGE_ENV_BACKEND`` says (``backends``):
    unset, the module's own ``make_env`` decides."""
    from edge.envs import backends

    entry = get_entry(name)
    backend = backends.chosen_backend()
    if backend is None:
        return entry.load().make_env(**kwargs)
    entry.load()  # an unknown or broken module fails here, with the registry's message
    return backends.make_env(name, entry.module, backend, **kwargs)


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
