# EDGE image. It installs the project exactly as the README does (`make install`) and runs `edge`.
#
# CPU (default):
#   docker build -t edge .
# CUDA (the PyTorch wheel brings its CUDA libraries; the base image brings the driver stack):
#   docker build -t edge:cuda \
#     --build-arg BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04 \
#     --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 .
# Run: docker run --rm edge env play --env household --policy expert --episodes 20
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# Where pip finds torch==2.13.0 for this image: the CPU wheel index by default.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PIP_EXTRA_INDEX_URL=${TORCH_INDEX} \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    DEBIAN_FRONTEND=noninteractive

# make and git for the Makefile and DVC; a C++ toolchain and cmake to compile the alfworld extra
# (fast-downward-textworld); Python 3.11 itself where the base image lacks it (CUDA).
RUN apt-get update \
    && apt-get install -y --no-install-recommends make git ca-certificates build-essential cmake \
    && if ! command -v python3.11 >/dev/null; then \
         apt-get install -y --no-install-recommends python3.11 python3.11-venv; \
       fi \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Dependency files first, so code edits do not invalidate the install layer.
COPY pyproject.toml constraints.txt Makefile README.md ./
COPY edge/__init__.py edge/__init__.py
COPY flows/__init__.py flows/__init__.py
RUN make install PYTHON=python3.11
# The install is editable, so the code copied now is what runs.
COPY . .
# .git stays out of the image (.dockerignore), and DVC refuses to run outside a git repository unless
# told: `dvc repro` / `make run` in a container work without git history.
RUN .venv/bin/dvc config --local core.no_scm true

ENV PATH=/app/.venv/bin:${PATH}
ENTRYPOINT ["edge"]
CMD ["--help"]
