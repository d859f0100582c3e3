# One command per task. Each target sets itself up: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The client generator the contract tests run; its own environment, as its pins (typer<0.28)
# do not fit the service's.
CLIENT_GENERATOR := openapi-python-client==0.29.1
GENERATOR_VENV := $(VENV)/client-generator
GENERATOR_STAMP := $(GENERATOR_VENV)/.installed

.PHONY: install run test lint format bench bench-write bench-find bench-find-embedded bench-lifecycle bench-events bench-exports bench-hostile clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

$(GENERATOR_STAMP): Makefile
	$(PYTHON) -m venv $(GENERATOR_VENV)
	$(GENERATOR_VENV)/bin/pip install --quiet "$(CLIENT_GENERATOR)"
	touch $(GENERATOR_STAMP)

install: $(STAMP) $(GENERATOR_STAMP)

run: $(STAMP)
	$(BIN)/units-api serve

test: $(STAMP) $(GENERATOR_STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: bench-write bench-find bench-find-embedded bench-lifecycle bench-events bench-exports

bench-write: $(STAMP)
	$(BIN)/python bench/write.py $(WRITE_ARGS)

bench-find: $(STAMP)
	$(BIN)/python bench/find.py $(FIND_ARGS)

bench-find-embedded: $(STAMP)
	$(BIN)/python bench/find_embedded.py $(FIND_EMBEDDED_ARGS)

bench-lifecycle: $(STAMP)
	$(BIN)/python bench/lifecycle.py

bench-events: $(STAMP)
	$(BIN)/python bench/events.py $(EVENTS_ARGS)

bench-exports: $(STAMP)
	$(BIN)/python bench/exports.py $(EXPORTS_ARGS)

bench-hostile: $(STAMP)
	$(BIN)/python bench/hostile.py $(HOSTILE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
