# The two commands of the README, plus the pieces they are made of.
.PHONY: run test setup lint unit bench clean-sandboxes

VENV ?= .venv
HOST ?= 127.0.0.1
PORT ?= 8080

run: setup  ## set everything up, then serve the API
	SIESTA_DATA_DIR=$${SIESTA_DATA_DIR:-.siesta} $(VENV)/bin/siesta-runtime serve --host $(HOST) --port $(PORT) --create-token

test: setup lint  ## set everything up, then run linters and the whole test suite
	$(VENV)/bin/pytest

setup:
	./scripts/setup.sh

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: setup
	$(VENV)/bin/python -m bench.run_command
	$(VENV)/bin/python -m bench.files
	$(VENV)/bin/python -m bench.leases
	$(VENV)/bin/python -m bench.resume

clean-sandboxes:  ## remove every container and volume this project created on this engine
	docker ps -aq --filter label=siesta.managed=true | xargs -r docker rm -f
	docker volume ls -q --filter label=siesta.managed=true | xargs -r docker volume rm -f
