"""Environments in worker processes, and stepping many environments at once.

The built-in environments step in microseconds, so rollouts call them one after another. A real
benchmark can take 0.1 s per step and seconds per reset (ALFWorld's TextWorld games); then the
environments, not the policy, set the pace. An :class:`EnvPool` starts a few worker processes, each
holding many environments; a :class:`RemoteEnv` is a handle to one of them and speaks the ordinary
:class:`~edge.envs.base.TextEnv` protocol. :func:`reset_all` and :func:`step_all` send every request
first and only then wait for the answers, so all workers are busy at once; for in-process
environments they are plain loops, which is why rollouts and ``edge env play`` always go through them.
``ray_pool.RayEnvPool`` is the same on Ray actors (its handles are these ``RemoteEnv``), and
``backends`` chooses between them (``$EDGE_ENV_BACKEND``).

Requests to one worker are answered in the order they were sent, so a reply is matched to its
request by position alone: no ids travel back. At most ``MAX_IN_FLIGHT`` requests wait per worker;
past that the oldest reply is read first, so neither side can block on a full pipe while the other
waits for it.
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from edge.envs.base import Reset, Step, Task, TextEnv

MAX_IN_FLIGHT = 16


class WorkerError(RuntimeError):
    """An environment worker raised, or exited; the message carries its traceback or exit code."""


def answer(envs: dict[int, TextEnv], factory: Callable[..., TextEnv], op: str, handle: int,
           argument: Any) -> tuple[str, Any]:
    """One request to a worker holding ``envs``: ``("ok", value)`` or ``("error", traceback)``.

    Requests are ``(op, handle, argument)``. ``reset`` (argument: the task and the keyword arguments
    the environment is built with, the first time) and ``step`` act on the environment ``handle``
    names; ``call`` runs ``argument = (function, args)`` (e.g. a scripted expert's planner);
    ``close`` forgets an environment. Shared by the worker processes here and the Ray actors
    (``ray_pool.py``), so both answer exactly alike.
    """
    try:
        if op == "close":
            envs.pop(handle, None)
            value = None
        elif op == "reset":
            task, env_kwargs = argument
            if handle not in envs:
                envs[handle] = factory(**env_kwargs)
            value = envs[handle].reset(task)
        elif op == "step":
            if handle not in envs:
                raise RuntimeError("call reset(task) before step()")
            value = envs[handle].step(argument)
        elif op == "call":
            function, args = argument
            value = function(*args)
        else:
            raise ValueError(f"unknown request {op!r}")
        return "ok", value
    except Exception as err:  # the caller re-raises it with the worker's traceback
        return "error", f"{type(err).__name__}: {err}\n{traceback.format_exc()}"


def _serve(conn: Connection, factory: Callable[..., TextEnv]) -> None:
    """A worker's loop: build environments on demand, answer every request in order (``close``, the one
    message without a reply, is not answered), exit on EOF."""
    envs: dict[int, TextEnv] = {}
    while True:
        try:
            op, handle, argument = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        reply = answer(envs, factory, op, handle, argument)
        if op != "close":
            conn.send(reply)


class Reply:
    """The answer to one request, read from the worker's pipe when first asked for."""

    def __init__(self, pool: EnvPool, worker: int):
        self._pool, self._worker = pool, worker
        self._done = False
        self._value: Any = None

    def _resolve(self, status: str, value: Any) -> None:
        self._done, self._status, self._value = True, status, value

    def result(self) -> Any:
        while not self._done:
            self._pool._receive(self._worker)
        if self._status == "error":
            raise WorkerError(f"{self._pool.name} worker {self._worker} failed: {self._value}")
        return self._value


class HandOut:
    """What every environment pool (worker processes here, Ray actors in ``ray_pool``) does the same way:
    hand out environment handles and one-off calls round robin over its workers. A pool sets
    ``_handles`` and ``_calls`` (``itertools.count()``) and provides ``workers`` and ``submit``."""

    _handles: itertools.count
    _calls: itertools.count

    def env(self, max_steps: int, **env_kwargs: Any) -> RemoteEnv:
        """A new environment handle; its environment is built in a worker at the first reset, as
        ``factory(max_steps=max_steps, **env_kwargs)``."""
        handle = next(self._handles)
        return RemoteEnv(self, handle % self.workers, handle, {"max_steps": max_steps, **env_kwargs})

    def call(self, function: Callable[..., Any], *args: Any):
        """Run ``function(*args)`` in a worker (round robin); the reply is read when asked for."""
        return self.submit(next(self._calls) % self.workers, "call", -1, (function, args))


class EnvPool(HandOut):
    """``workers`` processes, each building environments with ``factory(**env_kwargs)`` (a picklable
    callable; the keyword arguments are given per environment by :meth:`env`)."""

    def __init__(self, name: str, factory: Callable[..., TextEnv], workers: int):
        if workers < 1:
            raise ValueError(f"an environment pool needs at least 1 worker, got {workers}")
        self.name = name
        # spawn, not fork: the parent may hold torch's thread pools and locks that a fork would copy.
        context = multiprocessing.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs = []
        for i in range(workers):
            parent, child = context.Pipe()
            proc = context.Process(target=_serve, args=(child, factory), name=f"edge-{name}-env-{i}", daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        self._pending: list[deque[Reply]] = [deque() for _ in range(workers)]
        self._handles = itertools.count()
        self._released: list[tuple[int, int]] = []
        """(worker, handle) of environments whose handles were garbage-collected; closed at the next send."""
        self._calls = itertools.count()
        self.closed = False
        atexit.register(self.close)

    @property
    def workers(self) -> int:
        return len(self._conns)

    def submit(self, worker: int, op: str, handle: int, argument: Any) -> Reply:
        if self.closed:
            raise WorkerError(f"the {self.name} environment pool is closed")
        while self._released:
            released_worker, released = self._released.pop()
            self._conns[released_worker].send(("close", released, None))
        while len(self._pending[worker]) >= MAX_IN_FLIGHT:
            self._receive(worker)
        self._conns[worker].send((op, handle, argument))
        reply = Reply(self, worker)
        self._pending[worker].append(reply)
        return reply

    def release(self, worker: int, handle: int) -> None:
        """Called when a handle is garbage-collected: only queued, since a collection can happen in
        the middle of another send on the same pipe."""
        self._released.append((worker, handle))

    def _receive(self, worker: int) -> None:
        try:
            status, value = self._conns[worker].recv()
        except (EOFError, OSError):
            code = self._procs[worker].exitcode
            raise WorkerError(f"{self.name} environment worker {worker} exited (exit code {code})") from None
        self._pending[worker].popleft()._resolve(status, value)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for conn in self._conns:
            conn.close()  # the worker sees EOF and returns
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()


class RemoteEnv:
    """One environment living in a worker of an :class:`EnvPool`."""

    def __init__(self, pool: EnvPool, worker: int, handle: int, env_kwargs: dict[str, Any]):
        self.name = pool.name
        self.max_steps: int = env_kwargs["max_steps"]
        self._pool, self._worker, self._handle, self._env_kwargs = pool, worker, handle, env_kwargs
        weakref.finalize(self, pool.release, worker, handle)

    def submit_reset(self, task: Task) -> Reply:
        return self._pool.submit(self._worker, "reset", self._handle, (task, self._env_kwargs))

    def submit_step(self, action: str) -> Reply:
        return self._pool.submit(self._worker, "step", self._handle, action)

    def reset(self, task: Task) -> Reset:
        return self.submit_reset(task).result()

    def step(self, action: str) -> Step:
        return self.submit_step(action).result()


def reset_all(envs: Sequence[TextEnv], tasks: Sequence[Task]) -> list[Reset]:
    """Reset ``envs[i]`` to ``tasks[i]``; environments in workers reset concurrently."""
    if len(envs) != len(tasks):
        raise ValueError(f"reset_all got {len(envs)} environments but {len(tasks)} tasks")
    pending = [env.submit_reset(task) if isinstance(env, RemoteEnv) else None for env, task in zip(envs, tasks)]
    return [reply.result() if reply is not None else env.reset(task)
            for env, task, reply in zip(envs, tasks, pending)]


def step_all(envs: Sequence[TextEnv], actions: Sequence[str]) -> list[Step]:
    """Step ``envs[i]`` with ``actions[i]``; environments in workers step concurrently."""
    if len(envs) != len(actions):
        raise ValueError(f"step_all got {len(envs)} environments but {len(actions)} actions")
    pending = [env.submit_step(action) if isinstance(env, RemoteEnv) else None for env, action in zip(envs, actions)]
    return [reply.result() if reply is not None else env.step(action)
            for env, action, reply in zip(envs, actions, pending)]
