# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test test-quick bench lock clean

# Everything (all extras) at the exact versions of constraints.txt; pyproject.toml keeps ranges.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[all,test]"
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

# Refresh constraints.txt from the installed environment (after changing pyproject.toml ranges).
lock: install
	{ echo "# The exact versions that make run, make test and CI install (pip install -c constraints.txt ...)."; \
	  echo "# pyproject.toml holds the ranges; regenerate this file with: make lock"; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^oomkb' | sed 's/^torch==\([0-9.]*\)+cpu$$/torch==\1/'; \
	} > constraints.txt

clean:
	rm -rf $(VENV) build *.egg-info
