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

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

# The main job on the embedded default: task files, warm start, EDGE and GRPO trainings, comparison.
run: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	$(BIN)/edge summary

test: install
	$(BIN)/ruff check edge flows tests benchmarks
	$(BIN)/python -m pytest -q

constraints: install
	{ sed -n '1,3p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v -iE '^torch=='; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache
