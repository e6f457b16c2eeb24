"""The real-model smoke benchmark (the logic is in edge/benchmarking/gpu_smoke.py; `edge bench gpu` is the same).

    python benchmarks/gpu_smoke.py --size small --out-dir benchmarks/results    # on a GPU
    python benchmarks/gpu_smoke.py --size tiny --device cpu --out-dir /tmp/smoke  # anywhere, in minutes

It imports no LanceDB, MLflow or Prefect, so it runs where only torch, transformers, peft, pyarrow and
pydantic are installed (README, "With a real model").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a bare checkout, not installed

from edge.benchmarking.gpu_smoke import main  # noqa: E402

if __name__ == "__main__":
    main()
