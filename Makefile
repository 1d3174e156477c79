# The two commands of the README, plus the pieces they are made of.
.PHONY: run test setup lint unit bench clean-sandboxes image docs

VENV ?= .venv
HOST ?= 127.0.0.1
PORT ?= 8080
# `make test` builds the sandbox images from scratch (no base, no cached layer), as a
# new machine does; FRESH_IMAGES=0 reuses them for a quicker local run.
FRESH_IMAGES ?= 1
# The suite runs in this many processes (pytest-xdist), one test module at a time each
# (`--dist loadfile`: a module's fixtures, e.g. its service, stay in one process). The
# Docker tests mostly wait on the engine, so three share two cores well: 27 min instead
# of 42 on this class of machine. TEST_PROCESSES=0 runs it in one process.
TEST_PROCESSES ?= 3

# One token on a development machine: it may approve what it asked for (publishFiles asks first).
run: setup  ## set everything up, then serve the API
	SIESTA_DATA_DIR=$${SIESTA_DATA_DIR:-.siesta} \
	SIESTA_TOOLS__ALLOW_SELF_APPROVAL=$${SIESTA_TOOLS__ALLOW_SELF_APPROVAL:-true} \
	$(VENV)/bin/siesta-runtime serve --host $(HOST) --port $(PORT) --create-token

# The test setup adds the test toolchain (Redis, kubectl, npm, Chromium, the dev extras) and
# says yes to restarting the Docker engine (SIESTA_SETUP_YES=1): the test machine is ours,
# and `make test` never stops to ask (CI runs it on a fresh machine).
test:  ## set everything up (images from scratch, gVisor registered), then linters and every test
	SIESTA_SETUP=test SIESTA_SETUP_YES=1 SIESTA_GVISOR=1 FRESH_IMAGES=$(FRESH_IMAGES) ./scripts/setup.sh
	$(MAKE) --no-print-directory lint
	$(VENV)/bin/pytest -n $(TEST_PROCESSES) --dist loadfile --durations=15

# What serving needs, no more; it asks before restarting a Docker engine that has
# containers (SIESTA_SETUP_YES=1 make run: without asking).
setup:
	SIESTA_SETUP=serve ./scripts/setup.sh

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench:  ## every benchmark beside its baseline; writes bench/results.md
	SIESTA_SETUP=test ./scripts/setup.sh  # the benchmarks use the tests' helpers and Redis
	$(VENV)/bin/python -m bench.suite

clean-sandboxes:  ## remove every container and volume this deployment created (by its deployment label)
	SIESTA_DATA_DIR=$${SIESTA_DATA_DIR:-.siesta} $(VENV)/bin/siesta-runtime sandboxes clean

image: setup  ## the service image, siesta/runtime:1 (see Dockerfile)
	./scripts/build-image.sh

# MkDocs comes with the dev extras, which the test setup installs (not `make run`'s).
docs:  ## the manual: generated references (docs/reference/), then the site in site/ (strict)
	@test -x $(VENV)/bin/mkdocs || { echo "make docs: MkDocs is in the dev extras: SIESTA_SETUP=test ./scripts/setup.sh first" >&2; exit 1; }
	$(VENV)/bin/python scripts/docs_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
