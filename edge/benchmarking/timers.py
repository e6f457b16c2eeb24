"""Timers the performance benchmark installs around the project's code without editing it: wrapped
calls, forward-pass hooks, latency percentiles, peak memory, folder sizes."""

from __future__ import annotations

import contextlib
import functools
import resource
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


class CallTimer:
    """Accumulated wall time and count of calls to the functions it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        return timed


@contextlib.contextmanager
def timing_attribute(owner: Any, name: str, timer: CallTimer) -> Iterator[CallTimer]:
    """Replace ``owner.name`` by a timed wrapper for the duration of the block (an instance's method,
    a module's function), so the benchmark observes the project's code without changing it."""
    own = name in vars(owner)
    original = getattr(owner, name)
    setattr(owner, name, timer.wrap(original))
    try:
        yield timer
    finally:
        if own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


class ForwardTimer:
    """Wall time inside forward calls of the modules attached, via hooks: the actor is not edited.

    Only the outermost call is timed, so nested hooked modules are never counted twice. The input
    size of every call that gets ``input_ids`` is added up: the tokens the model actually processed,
    padding included. On an accelerator the hooks synchronise, or the time would land elsewhere.
    Used as a context manager: leaving it removes every hook attached."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.passes = 0
        """Calls that received ``input_ids`` (one per micro-batch through the backbone)."""
        self.tokens = 0
        self._depth = 0
        self._started = 0.0
        self._handles: list = []
        self._sync: Callable[[], None] = lambda: None

    def attach(self, modules: list, device=None) -> None:
        import torch

        if device is not None and torch.device(device).type == "cuda":
            self._sync = torch.cuda.synchronize
        for module in modules:
            self._handles.append(module.register_forward_pre_hook(self._before, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._after, with_kwargs=True, always_call=True))

    def _before(self, module, args, kwargs) -> None:
        if self._depth == 0:
            self._sync()
            self._started = time.perf_counter()
        self._depth += 1
        ids = kwargs.get("input_ids")
        if ids is not None:
            self.passes += 1
            self.tokens += int(ids.numel())

    def _after(self, module, args, kwargs, output) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._sync()
            self.seconds += time.perf_counter() - self._started
            self.calls += 1

    def __enter__(self) -> ForwardTimer:
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    """p50, p99, mean and max of latencies given in seconds, in milliseconds."""
    values = np.asarray(seconds, dtype=float) * 1000.0
    return {"p50_ms": float(np.percentile(values, 50)), "p99_ms": float(np.percentile(values, 99)),
            "mean_ms": float(values.mean()), "max_ms": float(values.max()), "n": int(values.size)}


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


@contextlib.contextmanager
def replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name = value`` for the duration of the block."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)
