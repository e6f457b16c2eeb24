#!/usr/bin/env bash
# The GPU checks of issue 17 as one short script for a lent GPU machine (see README, "With a real model"):
# the CUDA tests of tests/test_gpu_path.py, then the smoke benchmark at ~0.15B parameters.
#
#   on the GPU machine, from the repository root:  OUT=<folder> bash benchmarks/gpu_check.sh
#
# The machine's image has torch, transformers, peft, pyarrow, accelerate, pyyaml and filelock but not pydantic:
# carry pydantic, pydantic-core, annotated-types and typing-inspection as cp312 wheels in .whl/ (installed
# below into /tmp/site when present). Everything it writes goes to $OUT.
set -euo pipefail
OUT=${OUT:?set OUT to the folder for the results}
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests/test_gpu_path.py 2>&1 | tee "$OUT/test_gpu_path.log"
python3 benchmarks/gpu_smoke.py --size small --device cuda --out-dir "$OUT" --work-dir /tmp/gpu_smoke_work \
  2>&1 | tee "$OUT/gpu_smoke.log"
