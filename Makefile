# The two commands a new user needs (see README): `make run` and `make test`.
# Both create .venv and install the project into it first, only when pyproject/constraints change.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Keep every tool's state inside the project and away from telemetry.
export PREFECT_HOME := $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW := ignore
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install run test lint constraints clean

install: $(VENV)/.installed

# With the alfworld extra (the real ALFWorld games; compiling it takes about 4 minutes and needs gcc,
# g++, cmake). The venv comes first on PATH because fast-downward-textworld's build runs `python`.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,alfworld,ray]'
	touch $@

# The main job on the embedded default: task files, warm start, EDGE and GRPO trainings, comparison.
run: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	$(BIN)/edge summary

# tests/test_alfworld.py plays the real games: ../shared/data/alfworld beside the repository when it is
# there and ALFWORLD_DATA is not set already (without games those tests skip, saying so).
SHARED_ALFWORLD := $(abspath $(CURDIR)/../shared/data/alfworld)
test: export ALFWORLD_DATA := $(or $(ALFWORLD_DATA),$(if $(wildcard $(SHARED_ALFWORLD)/json_2.1.1),$(SHARED_ALFWORLD)))
test: install
	$(BIN)/ruff check edge flows tests benchmarks
	$(BIN)/python -m pytest -q

constraints: install
	{ sed -n '1,3p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v -iE '^torch=='; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache
