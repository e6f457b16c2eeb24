"""Joining a Ray cluster: the one place EDGE calls ``ray.init`` (optional extra ``edge-rl[ray]``).

Two things run on Ray: the learning benchmark's warm starts and runs (``edge bench learning --ray``,
``edge/benchmarking/on_ray.py``) and environment workers as actors (``EDGE_ENV_BACKEND=ray``,
``edge/envs/ray_pool.py``). Both connect here, to the address they are given, else
``$EDGE_RAY_ADDRESS``, else Ray's own ``$RAY_ADDRESS``; with none of them a private Ray instance
starts in this process (no dashboard).

Ray workers do not inherit the environment of the process that submits work to them: they inherit
the one ``ray start`` ran in, on their own machine. :func:`forwarded_environment` is what EDGE hands
over explicitly (its own settings, the data folders, the trackers' settings), never ``PATH`` or
``HOME``, which belong to the machine that runs the work.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ADDRESS_VARIABLE = "EDGE_RAY_ADDRESS"
"""The cluster to join when no address is given (``host:port`` of the head's GCS, ``auto``, or ``ray://``)."""

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")

FORWARDED_PREFIXES = ("EDGE_", "ALFWORLD_", "WEBSHOP_", "MLFLOW_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "PREFECT_")
"""Variables of the submitting process that its Ray tasks and actors see too."""
FORWARDED_NAMES = ("DO_NOT_TRACK",)


def require_ray():
    """The ``ray`` module, or an error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RuntimeError("Ray is not installed: pip install -c constraints.txt -e '.[ray]' "
                           "(the `ray` extra pins ray and prefect-ray)") from None
    return ray


def cluster_address(address: str | None = None) -> str | None:
    """The address to join: ``address``, else ``$EDGE_RAY_ADDRESS``, else ``$RAY_ADDRESS`` (None: none)."""
    return address or os.environ.get(ADDRESS_VARIABLE) or os.environ.get("RAY_ADDRESS") or None


def is_loopback(address: str | None) -> bool:
    if not address or address == "auto":
        return False
    host = address.split("://")[-1].rsplit(":", 1)[0]
    return host in LOOPBACK_HOSTS


def connect(address: str | None = None):
    """Join the cluster at ``address`` (see :func:`cluster_address`) once per process; returns ``ray``.

    A cluster on 127.0.0.1 (``ray start --head --node-ip-address 127.0.0.1``) is reachable only if this
    process also calls its own node 127.0.0.1: on Linux Ray replaces a loopback address by the
    machine's outward one unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which is therefore set here
    for loopback addresses (it must be set before Ray is imported; ``tests/test_ray.py`` and the
    README's single-machine recipe set it in the environment)."""
    address = cluster_address(address)
    prepare_for(address)
    ray = require_ray()
    if ray.is_initialized():
        return ray
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address is None:
        # A private instance for this process: no dashboard, nothing listening beyond what Ray needs.
        ray.init(include_dashboard=False, **options)
    else:
        check_reachable(address)
        ray.init(address=address, **options)
    return ray


def prepare_for(address: str | None) -> None:
    """What must hold before Ray is imported to join ``address``: a loopback cluster needs
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (see :func:`connect`), which Ray reads once, on import; if it
    was imported without it, joining would wait for ever, so this says so instead."""
    if not is_loopback(address):
        return
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and getattr(constants, "ENABLE_RAY_CLUSTER", False):
        raise RuntimeError(f"the Ray cluster at {address} listens on the loopback address only, which Ray joins "
                           "only with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 set before it is imported: set it in "
                           "the environment")


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """A clear error when nothing answers at ``host:port`` (``ray.init`` would wait for ever)."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as err:
        raise RuntimeError(f"no Ray cluster answers at {address} ({err}); start one with "
                           f"`ray start --head --port {port or 6379}` or give its head's host:port") from None


def forwarded_environment() -> dict[str, str]:
    """EDGE's own, the data folders' and the trackers' variables of this process, for Ray workers."""
    return {k: v for k, v in os.environ.items()
            if (k.startswith(FORWARDED_PREFIXES) or k in FORWARDED_NAMES) and k != ADDRESS_VARIABLE}


def describe_cluster() -> str:
    """One line: how many nodes, CPUs and GPUs the joined cluster has."""
    ray = require_ray()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    resources = ray.cluster_resources()
    gpus = resources.get("GPU", 0)
    return (f"Ray cluster of {len(nodes)} node{'s' if len(nodes) != 1 else ''}, {resources.get('CPU', 0):g} CPUs"
            + (f", {gpus:g} GPUs" if gpus else ""))


LOOPBACK_CLUSTER_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                        "RAY_USAGE_STATS_ENABLED": "0"}
"""A single-machine cluster on 127.0.0.1: no token (nothing else can reach it), the loopback address
kept as the node's address, no usage report. The joining process needs the same before importing Ray."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_cluster(num_cpus: int = 2, startup_timeout: float = 90.0) -> Iterator[str]:
    """A Ray head on 127.0.0.1 with ``num_cpus`` CPUs, no GPU and no dashboard, on free ports with its own
    temporary folder; yields its address and stops every process it started (Linux: the processes of
    its session) on exit. What the tests and ``benchmarks/ray_overhead.py`` run on; by hand it is
    ``ray start --head --node-ip-address 127.0.0.1 --port 6379 --num-cpus 2 --include-dashboard false``
    with :data:`LOOPBACK_CLUSTER_ENV` in the environment."""
    os.environ.update(LOOPBACK_CLUSTER_ENV)
    temp = Path(tempfile.mkdtemp(prefix="edge-ray-", dir="/tmp"))  # short: Ray's socket paths must fit
    port = _free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    cmd = [str(ray_bin), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
           "--num-cpus", str(num_cpus), "--num-gpus", "0", "--include-dashboard", "false",
           "--dashboard-port", str(_free_port()), "--ray-client-server-port", str(_free_port()),
           "--disable-usage-stats", "--temp-dir", str(temp)]
    head = subprocess.Popen(cmd, env=os.environ | LOOPBACK_CLUSTER_ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    started = threading.Event()
    output: list[str] = []

    def watch() -> None:  # reads the head's output for as long as it runs, so its pipe never fills
        for line in head.stdout:
            output.append(line)
            if "Ray runtime started" in line:
                started.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not started.wait(0.2):
            if head.poll() is not None:
                raise RuntimeError(f"ray start exited ({head.returncode}): {''.join(output[-5:])}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not start in {startup_timeout:.0f} s: {''.join(output[-5:])}")
        yield f"127.0.0.1:{port}"
    finally:
        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()
        stop_session(head)
        shutil.rmtree(temp, ignore_errors=True)


def stop_session(leader: subprocess.Popen) -> None:
    """Stop every process of the session ``leader`` leads (Ray's daemons, workers and their children):
    half a second to end cleanly, then SIGKILL."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == leader.pid:
                    members.append(int(entry.name))
            except OSError:
                pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in members:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        time.sleep(0.5)
    leader.wait(timeout=10)
