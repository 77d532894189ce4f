# neardup: `make serve` and `make test` are all a new machine needs (each creates .venv).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# `make serve HOST=0.0.0.0 PORT=9000` passes --host/--port; unset, the service's settings decide
# (NEARDUP_HOST and NEARDUP_PORT, else 127.0.0.1:8000).
HOST ?=
PORT ?=

.PHONY: serve test lint bench mutation clean browser postgres java

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# One stamp per set of extras, redone when pyproject.toml changes. A set that holds the test
# extras stamps .test too: `make lint` then `make test` (.ci/run) installs once, not twice.
$(VENV)/.base: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.test: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e '.[test,postgres]'
	touch $@

$(VENV)/.lint: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e '.[test,lint,postgres]'
	touch $@ $(VENV)/.test

$(VENV)/.mutation: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e '.[test,postgres,mutation]'
	touch $@ $(VENV)/.test

$(VENV)/.bench: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e '.[bench,postgres,spark]'
	touch $@

serve: $(VENV)/.base
	$(VENV)/bin/neardup serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

# The browser tests drive Debian's Chromium (no browser download): install it when missing.
browser:
	@command -v chromium >/dev/null || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The replica tests and benchmark start a throwaway PostgreSQL from Debian's server binaries.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing Debian's postgresql for the replica tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

# The Spark engine's tests and benchmark run a JVM: install Debian's Java 17 when missing.
java:
	@command -v java >/dev/null || { \
	  echo "installing Debian's openjdk-17-jre-headless for the Spark engine"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }

# The suite on TEST_WORKERS pytest-xdist workers (each with its own PostgreSQL, Spark session and
# browser); TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 2
test: $(VENV)/.test browser postgres java
	$(PY) -m pytest -n $(TEST_WORKERS)

lint: $(VENV)/.lint
	$(VENV)/bin/ruff check core app neardup/*.py tests bench
	$(VENV)/bin/ruff format --check core app neardup/*.py tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# Speed and memory against the peers (datasketch, rensa): every module of bench/ in turn, and
# bench/RESULTS.md rewritten with the whole run (kept as it was if a module fails).
bench: $(VENV)/.bench postgres java
	$(PY) -m bench --output bench/RESULTS.md

# Mutation testing (mutmut), not part of `make test`: each package in .mutation/PACKAGE with the
# fast tests that cover it; prints the kill rate per package and the time taken (an hour or
# more on 2 cores: tests/mutation/TRIAGE.md has the measured figures and the survivors).
# `make mutation MUTATION_ARGS="--package core --modules core._lsh core._text"` runs a subset.
# `make mutation MUTATION_ARGS="--package core --sample 300 --seed 4"` measures a whole package on a
# uniform sample (the rate with its 95 % interval; about 16 minutes for core here).
MUTATION_ARGS ?=
mutation: $(VENV)/.mutation java
	$(PY) -m tests.mutation $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .mutation
