"""Environments as Ray actors, so slow ones (ALFWorld) can live on other machines of a cluster.

A :class:`RayEnvPool` is the Ray twin of :class:`~edge.envs.parallel.EnvPool`: ``actors`` actors,
each holding many environments and answering requests with the very function the worker processes
use (``parallel.answer``), and its handles are the same :class:`~edge.envs.parallel.RemoteEnv`, so
``reset_all`` / ``step_all``, rollouts and evaluation do not know which pool they talk to.

One Ray call costs far more than one message on a pipe (~0.5 ms against ~20 us), so requests are not
sent one by one: they wait in a buffer per actor until someone asks for an answer, and then every
actor gets its whole buffer in one call (a lockstep of 64 environments on 4 actors is 4 calls, not 64).
Calls from one caller to one actor run in the order they were made, as requests on a pipe do, so
each answer is matched to its request by position.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

from edge.envs.base import TextEnv
from edge.envs.parallel import HandOut, WorkerError, answer


class EnvHost:
    """The actor: environments built with ``factory(**env_kwargs)``, keyed by handle."""

    def __init__(self, factory: Callable[..., TextEnv], env_vars: dict[str, str]):
        os.environ.update(env_vars)  # before any environment module reads its settings
        self.factory = factory
        self.envs: dict[int, TextEnv] = {}

    def serve(self, requests: list[tuple[str, int, Any]]) -> list[tuple[str, Any]]:
        """Answer ``requests`` in order; one failing does not stop the next (as in a worker process)."""
        return [answer(self.envs, self.factory, op, handle, argument) for op, handle, argument in requests]


class _Batch:
    """One call to one actor: the answers to its requests, fetched once."""

    def __init__(self, pool: RayEnvPool, actor: int, ref):
        self.pool, self.actor, self.ref = pool, actor, ref
        self.answers: list[tuple[str, Any]] | None = None

    def get(self) -> list[tuple[str, Any]]:
        if self.answers is None:
            ray = self.pool.ray
            try:
                self.answers = ray.get(self.ref)
            except ray.exceptions.RayError as err:
                raise WorkerError(f"{self.pool.name} environment actor {self.actor} failed: {err}") from None
        return self.answers


class RayReply:
    """The answer to one request, sent with its actor's buffer when first asked for."""

    def __init__(self, pool: RayEnvPool, actor: int):
        self._pool, self._actor = pool, actor
        self._batch: _Batch | None = None
        self._index = -1

    def result(self) -> Any:
        if self._batch is None:
            self._pool.flush()
        status, value = self._batch.get()[self._index]
        if status == "error":
            raise WorkerError(f"{self._pool.name} worker {self._actor} failed: {value}")
        return value


class RayEnvPool(HandOut):
    """``actors`` Ray actors, each reserving ``cpus`` CPUs, spread over the cluster's nodes, each building
    environments with ``factory(**env_kwargs)`` (a picklable callable importable on every node).
    ``env_vars`` are set in the actors before anything else runs (Ray workers do not inherit this
    process's environment)."""

    def __init__(self, name: str, factory: Callable[..., TextEnv], actors: int, cpus: float = 1.0,
                 env_vars: dict[str, str] | None = None, address: str | None = None):
        if actors < 1:
            raise ValueError(f"an environment pool needs at least 1 actor, got {actors}")
        from edge.ray_cluster import connect

        self.name = name
        self.ray = connect(address)
        # SPREAD: one actor per node first, so a slow environment's load leaves the submitting machine.
        host = self.ray.remote(EnvHost).options(num_cpus=cpus, scheduling_strategy="SPREAD", max_restarts=0)
        self._actors = [host.remote(factory, dict(env_vars or {})) for _ in range(actors)]
        self._buffers: list[list[tuple[str, int, Any, RayReply | None]]] = [[] for _ in range(actors)]
        self._handles = itertools.count()
        self._calls = itertools.count()
        self.closed = False

    @property
    def workers(self) -> int:
        return len(self._actors)

    def submit(self, worker: int, op: str, handle: int, argument: Any) -> RayReply:
        if self.closed:
            raise WorkerError(f"the {self.name} environment pool is closed")
        reply = RayReply(self, worker)
        self._buffers[worker].append((op, handle, argument, reply))
        return reply

    def release(self, worker: int, handle: int) -> None:
        """A handle was garbage-collected: its environment is forgotten with the actor's next call."""
        if not self.closed:
            self._buffers[worker].append(("close", handle, None, None))

    def flush(self) -> None:
        """Send every actor its buffered requests, one call each."""
        for actor, buffer in enumerate(self._buffers):
            if not buffer:
                continue
            self._buffers[actor] = []
            batch = _Batch(self, actor, self._actors[actor].serve.remote([request[:3] for request in buffer]))
            for index, (*_, reply) in enumerate(buffer):
                if reply is not None:
                    reply._batch, reply._index = batch, index

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for actor in self._actors:
            self.ray.kill(actor)
