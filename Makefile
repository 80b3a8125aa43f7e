# Statewise task runner. CI runs `make test` (through .ci/run) and nothing else.
# Every target installs what it needs first (scripts/bootstrap, idempotent).
SHELL := /bin/bash
VENV := .venv/bin
PYTEST_ARGS ?=
# make test's pytest workers (pytest-xdist), each with its own broker and Spark session.
# Whole files go to one worker, so module fixtures stay shared; two workers overlap one
# test's waits (process starts, paced producers) with another's work (figures: README).
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
# make demo APP=iot: the demo's app, from the command line only (not the environment)
APP :=

.PHONY: help setup demo test test-unit test-integration test-slow lint lock broker-up broker-down \
        cluster-up cluster-down clean

help:  ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup:  ## install the venv and the JVM jars into this clone (idempotent)
	@scripts/bootstrap

demo: setup  ## live demo: local Kafka, a producer, an app's results as they arrive (APP=iot|trading|all; default fraud; Ctrl-C stops)
	@$(VENV)/statewise demo $(APP)

test: setup  ## lint, then every test (unit, then integration on a real broker and Spark)
	@$(VENV)/ruff check .
	@$(VENV)/lint-imports --no-cache
	@$(VENV)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-unit: setup  ## unit tests only: no Kafka, no JVM
	@$(VENV)/pytest -m "not integration" $(PYTEST_ARGS)

test-integration: setup  ## integration and recovery tests only
	@$(VENV)/pytest -m integration $(PYTEST_ARGS)

test-slow: setup  ## the slow tests only (minutes each, not in CI): each app on a Spark and Kafka cluster under faults
	@$(VENV)/pytest --slow -m slow $(PYTEST_ARGS)

lint: setup  ## ruff, then the import layering of shared/ (import-linter, pyproject.toml)
	@$(VENV)/ruff check .
	@$(VENV)/lint-imports --no-cache

lock: setup  ## re-pin requirements.lock (and the runtime, image and executors' locks) from pyproject.toml's ranges, with hashes
	@python3.11 -m venv /tmp/statewise-lock && /tmp/statewise-lock/bin/pip install -q pip-tools \
	  && /tmp/statewise-lock/bin/pip-compile -q --generate-hashes --strip-extras --no-header \
	     --no-annotate --allow-unsafe --extra dev --extra bench -o requirements.lock pyproject.toml \
	  && printf 'numpy\npandas\npyarrow\nprotobuf\nconfluent-kafka\norjson\n' > /tmp/statewise-lock/executor.in \
	  && /tmp/statewise-lock/bin/pip-compile -q --generate-hashes --no-header --no-annotate \
	     -c requirements.lock -o deploy/cluster/requirements-executor.lock \
	     /tmp/statewise-lock/executor.in \
	  && /tmp/statewise-lock/bin/pip-compile -q --generate-hashes --strip-extras --no-header \
	     --no-annotate --allow-unsafe -c requirements.lock -o requirements-runtime.lock pyproject.toml \
	  && /tmp/statewise-lock/bin/pip-compile -q --generate-hashes --strip-extras --no-header \
	     --no-annotate --unsafe-package pyspark -c requirements.lock \
	     -o /tmp/statewise-lock/image.lock pyproject.toml \
	  && { printf '%s\n' "# requirements-runtime.lock without pyspark, for the image (deploy/k8s/Dockerfile): its" \
	       "# pyspark is the base image's Spark, installed once. Regenerate: make lock."; \
	       sed -e '/^# WARNING: The following packages/,$$d' /tmp/statewise-lock/image.lock; \
	     } > deploy/k8s/requirements-image.lock \
	  && sed -i -e '/^--find-links/d' -e '/./,$$!d' requirements.lock deploy/cluster/requirements-executor.lock \
	     requirements-runtime.lock deploy/k8s/requirements-image.lock \
	  && rm -rf /tmp/statewise-lock

broker-up: setup  ## start the local Kafka broker (KRaft) on 127.0.0.1:9092
	@$(VENV)/statewise broker up

broker-down:  ## stop the local Kafka broker
	@$(VENV)/statewise broker down

cluster-up: setup  ## start a local Spark standalone master and a worker (see deploy/cluster)
	@$(VENV)/statewise cluster up

cluster-down:  ## stop the local Spark standalone cluster
	@$(VENV)/statewise cluster down

clean: broker-down cluster-down  ## remove local state (checkpoints, broker data, metrics); keeps .venv and jars
	rm -rf var
