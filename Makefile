# The one entry point: `make run` starts the suite, `make test` proves it. `make help` lists the rest.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_FLAGS ?=

.DEFAULT_GOAL := help
.PHONY: help install console infra podman kubectl promtools pgbouncer chromium migrate run demo test unit integration console-test lint format bench screenshots clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

install: $(STAMP) console ## Create .venv, install the pinned dependencies, build the console

console: $(STAMP) ## Build the web console (npm ci from the lockfile, API types from the services, vite build)
	@scripts/build-console.sh

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

infra: ## Start the local PostgreSQL and Redis if they are installed but stopped
	@scripts/ensure-infra.sh

podman: ## Install Debian's podman and runc if missing (never fails: the podman tests then skip)
	@scripts/ensure-podman.sh

kubectl: ## Install Debian's kubectl if missing (never fails: the kustomize build tests then skip)
	@scripts/ensure-kubectl.sh

chromium: ## Install Debian's Chromium if missing (never fails: the console's browser tests then skip)
	@scripts/ensure-chromium.sh

pgbouncer: ## Install Debian's pgbouncer if missing (never fails: the tests behind a transaction pooler then skip)
	@scripts/ensure-pgbouncer.sh

promtools: ## Install Debian's promtool and amtool if missing (never fails: the tests using them then skip)
	@scripts/ensure-prometheus-tools.sh

migrate: install infra ## Apply every service's migrations (each in its own schema)
	$(BIN)/python -m libs.common.db.migrate

run: install infra ## Start the whole suite: embedded broker, six services, simulated fleet, gateway and console
	$(BIN)/python -m libs.devkit.devstack

demo: install ## The guided tour, against a suite started by `make run` in another terminal
	$(BIN)/python scripts/demo.py

lint: install ## ruff (lint + format check) and mypy --strict
	$(BIN)/ruff check libs services tests bench scripts
	$(BIN)/ruff format --check libs services tests bench scripts
	$(BIN)/mypy

unit: install kubectl ## Unit tests only (no IO)
	$(BIN)/pytest -q -m "not integration" $(PYTEST_FLAGS)

integration: install infra podman ## Integration tests against the real broker, PostgreSQL and Redis
	$(BIN)/pytest -q -m integration $(PYTEST_FLAGS)

# mypy (minutes on a clean clone, one core) runs beside pytest, whose integration tests mostly wait on
# IO; both must pass. Its report is printed after the tests.
test: install infra podman kubectl promtools pgbouncer chromium console-test ## Lint, the console's unit tests, then every Python test (mypy beside them; the browser tests among the integration tests)
	$(BIN)/ruff check libs services tests bench scripts
	$(BIN)/ruff format --check libs services tests bench scripts
	@$(BIN)/mypy > $(VENV)/mypy.log 2>&1 & types=$$!; \
	  $(BIN)/pytest -q $(PYTEST_FLAGS); tests=$$?; \
	  wait $$types; typed=$$?; echo "mypy (exit $$typed):"; cat $(VENV)/mypy.log; \
	  test $$tests -eq 0 -a $$typed -eq 0

bench: install infra ## Run every benchmark under bench/ and write bench/REPORT.md
	$(BIN)/python -m bench.run

console-test: console ## The console's type check and unit tests (vitest)
	cd console && npx tsc -b && npx vitest run

screenshots: install infra chromium ## Drive the console in Chromium and write every page's screenshot to docs/console/
	CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(BIN)/pytest -q tests/integration/console

format: install ## Apply ruff's fixes and formatting
	$(BIN)/ruff check --fix libs services tests bench scripts
	$(BIN)/ruff format libs services tests bench scripts

clean: ## Remove the virtualenv, caches and run state
	rm -rf $(VENV) .run .pytest_cache .mypy_cache .ruff_cache console/node_modules console/dist console/openapi console/src/api/gen
