# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test test-quick bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/oomkb index
	$(BIN)/oomkb serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest

# The edit-run loop: everything but the tests marked slow (under 2 minutes on 2 cores).
test-quick: install
	$(BIN)/python -m pytest -m "not slow" -q

bench: install
	$(BIN)/python benchmarks/retrieval.py

clean:
	rm -rf $(VENV) build *.egg-info
