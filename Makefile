# Overlap: `make run` starts the whole platform locally; `make test` runs every test.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The platform (Django 6, Celery) needs Python 3.12+; the grading runner uses the CPU
# torch wheel built for Python 3.11, the same interpreter as the sandbox image.
# The first candidate that actually runs wins (a pyenv shim may exist but refuse to run).
find_python = $(firstword $(foreach p,$(1),$(shell $(p) -c 'import sys; print(sys.executable)' 2>/dev/null)))
PYTHON_PLATFORM ?= $(call find_python,python3.12 python3.13 $(wildcard $(HOME)/.pyenv/versions/3.1[23]*/bin/python3))
PYTHON_RUNNER ?= $(call find_python,python3.11 /usr/bin/python3.11 $(wildcard $(HOME)/.pyenv/versions/3.11*/bin/python3))
VENV := .venv
RUNNER_VENV := .venv-runner
PY := $(VENV)/bin/python
RUNNER_PY := $(RUNNER_VENV)/bin/python
# `make run` is meant for real use on one machine: DEBUG stays off unless asked (DEBUG=1 make
# run), and the SECRET_KEY is generated once into var/secret_key (0600) unless one is set.
RUN_ENV := OVERLAP_SECRET_KEY_FILE=$(CURDIR)/var/secret_key \
  OVERLAP_DEMO_PASSWORD_FILE=$(CURDIR)/var/demo_password
export OVERLAP_RUNNER_PYTHON ?= $(CURDIR)/$(RUNNER_PY)

.PHONY: help install run test lint bench validate asyncio-suites sandbox-image clean

help:
	@echo "make run    - start Overlap on http://127.0.0.1:8000 (OVERLAP_BIND; SQLite, own Redis, worker, beat, web)"
	@echo "make test   - run every test (uses DATABASE_URL / REDIS_URL when set)"
	@echo "make bench  - grading, sandbox and live-interview benchmarks"
	@echo "make lint   - ruff"
	@echo "make sandbox-image - build the docker sandbox image offline"

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON_PLATFORM)" || { echo "Python 3.12 not found (set PYTHON_PLATFORM=...)"; exit 1; }
	$(PYTHON_PLATFORM) -m venv $(VENV)
	$(VENV)/bin/pip install -qq -e ".[dev]"
	touch $@

$(RUNNER_VENV)/.installed: runner/requirements.txt
	@test -n "$(PYTHON_RUNNER)" || { echo "Python 3.11 not found (set PYTHON_RUNNER=...)"; exit 1; }
	$(PYTHON_RUNNER) -m venv $(RUNNER_VENV)
	$(RUNNER_VENV)/bin/pip install -qq -r runner/requirements.txt pytest==9.0.3 pytest-timeout==2.4.0
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Browser bundles (the CodeMirror 6 editor…) built from npm packages, never committed:
# platform/<app>/assets/<name>.js -> static-build/build/<name>.js
ASSETS := $(wildcard platform/*/assets/*.js)
BUNDLES := $(addprefix static-build/build/,$(notdir $(ASSETS)))
vpath %.js $(sort $(dir $(ASSETS)))
static-build/build/%.js: %.js node_modules/.installed
	node_modules/.bin/esbuild $< --bundle --minify --format=iife --target=es2020 --outfile=$@ --log-level=warning

# Modules a bundle imports (not bundles of their own) rebuild the bundles that use them.
static-build/build/pad.js: $(wildcard platform/interviews/assets/parts/*.js)

install: $(VENV)/.installed $(RUNNER_VENV)/.installed node_modules/.installed $(BUNDLES)

# The docker sandbox image, built offline (debootstrap + local wheels); needs a Docker engine.
sandbox-image: $(VENV)/.installed
	sh docker/start-dockerd.sh
	PYTHON=$(CURDIR)/$(PY) sh docker/sandbox/build.sh

run: install
	$(RUN_ENV) $(PY) manage.py migrate --noinput
	$(RUN_ENV) $(PY) manage.py collectstatic --noinput --verbosity 0
	$(RUN_ENV) $(PY) manage.py sync_content
	$(RUN_ENV) $(PY) manage.py ensure_demo_user
	$(RUN_ENV) $(PY) manage.py runstack

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

validate: $(RUNNER_VENV)/.installed
	@for dir in exercises/*/; do \
	  if [ -f "$$dir/grader.py" ]; then $(RUNNER_PY) -m runner validate "$$dir" || exit 1; fi; \
	done

# Tests run with DEBUG off, like production, which refuses a weak SECRET_KEY: a strong one
# that is only ever used by the test suite.
TEST_SECRET_KEY := tests-only_5b0e2f9c7d1a4e6b8c3f0a2d9e7b1c4f6a8d0e2b4c6f8a1d3e5
test: install lint
	SECRET_KEY=$(TEST_SECRET_KEY) $(PY) manage.py collectstatic --noinput --verbosity 0
	SECRET_KEY=$(TEST_SECRET_KEY) $(PY) -m pytest tests --ignore=tests/runner
	@if [ -d tests/runner ]; then $(RUNNER_PY) -m pytest tests/runner -p no:django; fi
	$(MAKE) --no-print-directory validate
	$(MAKE) --no-print-directory asyncio-suites SEEDS=1-3

# CPython's own asyncio test suites on the candidates' event loop (seeded completion order).
SEEDS ?= 1-20
asyncio-suites: $(RUNNER_VENV)/.installed
	$(RUNNER_PY) -m runner.asyncio_suites --seeds $(SEEDS)

bench: install
	$(RUNNER_PY) -m runner bench
	$(PY) -m runner.sandbox.bench
	$(RUN_ENV) $(PY) manage.py migrate --noinput --verbosity 0
	$(RUN_ENV) $(PY) manage.py collectstatic --noinput --verbosity 0
	$(RUN_ENV) $(PY) manage.py bench_live
	$(RUN_ENV) $(PY) manage.py bench_pad
	$(RUN_ENV) $(PY) manage.py bench_capacity

clean:
	rm -rf $(VENV) $(RUNNER_VENV) node_modules var static-collected
