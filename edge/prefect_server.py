"""A Prefect server on loopback for as long as a ``with`` block runs: `edge serve` serves the
deployments against it, and the tests that run flows on Ray workers report to one (Prefect's
ephemeral mode would start a server inside every worker)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from edge.ray_cluster import stop_session


class PrefectServerError(RuntimeError):
    """The server exited, or did not answer in time."""


@contextmanager
def running_prefect_server(port: int, home: Path, timeout: float = 180.0, quiet: bool = False) -> Iterator[str]:
    """Start `prefect server start` on 127.0.0.1:``port`` with its state in ``home`` (``PREFECT_HOME``),
    wait until its health endpoint answers, and yield the API URL; stop the server and its children on
    leaving. ``quiet`` discards the server's own output. A server that exits or is not up within
    ``timeout`` seconds is a ``PrefectServerError`` naming the URL."""
    api = f"http://127.0.0.1:{port}/api"
    env = os.environ | {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)  # the server itself must not point at another one
    output = subprocess.DEVNULL if quiet else None
    server = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start", "--host",
                               "127.0.0.1", "--port", str(port), "--analytics-off"],
                              env=env, stdout=output, stderr=output, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{api}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise PrefectServerError(f"the Prefect server did not come up on {api}") from None
                time.sleep(0.5)
        yield api
    finally:
        stop_session(server)
