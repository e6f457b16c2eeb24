"""Docker cannot run here, so the Dockerfile is checked statically: it must parse, default to a
CPU Python 3.11 base with a build argument for a CUDA one, and install exactly as the README does."""

import re
from pathlib import Path

from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[1]


def parsed():
    parser = DockerfileParser(fileobj=(ROOT / "Dockerfile").open("rb"))
    return parser, [(i["instruction"], i["value"]) for i in parser.structure]


def test_dockerfile_parses_with_cpu_default_and_cuda_build_arg():
    parser, instructions = parsed()
    args = [v for k, v in instructions if k == "ARG"]
    assert any(a.startswith("BASE_IMAGE=python:3.11") for a in args)
    assert any(a.startswith("TORCH_INDEX=https://download.pytorch.org/whl/cpu") for a in args)
    assert [v for k, v in instructions if k == "FROM"] == ["${BASE_IMAGE}"]
    assert parser.baseimage.startswith("python:3.11")  # the default resolves to a CPU Python image
    assert "cu12" in (ROOT / "Dockerfile").read_text()  # the CUDA recipe is documented in the file


def test_dockerfile_installs_like_the_readme_and_runs_edge():
    _, instructions = parsed()
    runs = " ".join(v for k, v in instructions if k == "RUN")
    assert "make install" in runs
    entry = [v for k, v in instructions if k == "ENTRYPOINT"]
    assert entry == ['["edge"]']
    copied = " ".join(v for k, v in instructions if k == "COPY")
    for needed in ("pyproject.toml", "constraints.txt", "Makefile"):
        assert needed in copied


def test_readme_commands_and_ci_share_the_install_target():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run: install\b", makefile, re.M)
    assert re.search(r"^test: install\b", makefile, re.M)
    recipe = re.search(r"^\$\(VENV\)/\.installed:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    assert "-c constraints.txt" in recipe and "'.[dev,alfworld,ray]'" in recipe
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_image_can_compile_the_alfworld_extra():
    # make install builds alfworld's fast-downward-textworld from source: C++ compiler and cmake.
    _, instructions = parsed()
    runs = " ".join(v for k, v in instructions if k == "RUN")
    assert "build-essential" in runs and "cmake" in runs
    assert re.search(r"^alfworld==0\.4\.2$", (ROOT / "constraints.txt").read_text(), re.M)


def test_torch_pin_is_the_local_cpu_build_version():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"torch==2.13.0"' in pyproject
    # torch stays out of constraints.txt so the CUDA image can take a CUDA wheel of the same version.
    assert not re.search(r"^torch==", (ROOT / "constraints.txt").read_text(), re.M)


def test_dockerignore_keeps_local_state_out_of_the_image():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in (".venv", "**/runs", "mlflow.db", ".git", "checkpoints", "*.egg-info"):
        assert path in ignored


def test_image_runs_dvc_without_git():
    # .git is not copied, so DVC must be told there is no SCM or `dvc repro` stops at once.
    runs = [value for instruction, value in parsed()[1] if instruction == "RUN"]
    assert any("dvc config --local core.no_scm true" in r for r in runs)
    assert ".git" in (ROOT / ".dockerignore").read_text().split()
