# One command per task. Each target sets itself up: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The service alone (`make run`); the test and lint tools on top of it (`make test`, `make lint`).
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# The client generator the contract tests run; its own environment, as its pins (typer<0.28)
# do not fit the service's.
CLIENT_GENERATOR := openapi-python-client==0.29.1
GENERATOR_VENV := $(VENV)/client-generator
GENERATOR_STAMP := $(GENERATOR_VENV)/.installed

.PHONY: install run test lint format bench bench-write bench-write-embedded bench-channels bench-slow-clients bench-find bench-find-embedded bench-lifecycle bench-events bench-exports bench-hostile bench-ops bench-middleware bench-replica bench-console bench-feeds screenshots clean bench-sitemaps bench-faults bench-dashboards

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(DEV_STAMP)

$(GENERATOR_STAMP): Makefile
	$(PYTHON) -m venv $(GENERATOR_VENV)
	$(GENERATOR_VENV)/bin/pip install --quiet "$(CLIENT_GENERATOR)"
	touch $(GENERATOR_STAMP)

install: $(DEV_STAMP) $(GENERATOR_STAMP)

run: $(STAMP)
	$(BIN)/units-api serve

test: $(DEV_STAMP) $(GENERATOR_STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

format: $(DEV_STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: bench-write bench-find bench-find-embedded bench-lifecycle bench-events bench-exports bench-ops bench-replica bench-console bench-feeds bench-dashboards

bench-write: $(DEV_STAMP)
	$(BIN)/python bench/write.py $(WRITE_ARGS)

bench-write-embedded: $(DEV_STAMP)
	$(BIN)/python bench/write_embedded.py $(WRITE_EMBEDDED_ARGS)

bench-slow-clients: $(DEV_STAMP)
	$(BIN)/python bench/slow_clients.py $(SLOW_CLIENTS_ARGS)

bench-channels: $(DEV_STAMP)
	$(BIN)/python bench/channels.py $(CHANNELS_ARGS)

bench-find: $(DEV_STAMP)
	$(BIN)/python bench/find.py $(FIND_ARGS)

bench-find-embedded: $(DEV_STAMP)
	$(BIN)/python bench/find_embedded.py $(FIND_EMBEDDED_ARGS)

bench-lifecycle: $(DEV_STAMP)
	$(BIN)/python bench/lifecycle.py

bench-events: $(DEV_STAMP)
	$(BIN)/python bench/events.py $(EVENTS_ARGS)

bench-exports: $(DEV_STAMP)
	$(BIN)/python bench/exports.py $(EXPORTS_ARGS)

bench-hostile: $(DEV_STAMP)
	$(BIN)/python bench/hostile.py $(HOSTILE_ARGS)

bench-ops: $(DEV_STAMP)
	$(BIN)/python bench/ops.py $(OPS_ARGS)

bench-middleware: $(DEV_STAMP)
	$(BIN)/python bench/middleware.py $(MIDDLEWARE_ARGS)

bench-replica: $(DEV_STAMP)
	$(BIN)/python bench/replica.py $(REPLICA_ARGS)

bench-faults: $(DEV_STAMP)
	$(BIN)/python bench/faults.py $(FAULTS_ARGS)

bench-console: $(DEV_STAMP)
	$(BIN)/python bench/console.py $(CONSOLE_ARGS)

bench-feeds: $(DEV_STAMP)
	$(BIN)/python bench/feeds.py $(FEEDS_ARGS)

bench-dashboards: $(DEV_STAMP)
	$(BIN)/python bench/dashboards.py $(DASHBOARDS_ARGS)

bench-sitemaps: $(DEV_STAMP)
	$(BIN)/python bench/sitemaps.py $(SITEMAPS_ARGS)

# Every console page in English and Arabic, into docs/screenshots (needs `chromium`).
screenshots: $(DEV_STAMP)
	$(BIN)/python docs/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
