"""Which machine a measurement was made on, in one line for result tables.

Results differ between CPUs (float kernels: the same seed builds different warm starts on an AVX-512
machine and on one without), so tables name the CPU model, and rows from different machines are not
paired."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe_machine() -> str:
    """E.g. "x86_64 AMD EPYC 9B14 with AVX-512, 2 cores, Python 3.11.7"."""
    model, cpuinfo = "", Path("/proc/cpuinfo")
    if cpuinfo.exists():
        text = cpuinfo.read_text()
        model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "")
        if " avx512f" in text:
            model += " with AVX-512"
    return f"{platform.machine()} {model}".strip() + f", {os.cpu_count()} cores, Python {platform.python_version()}"
