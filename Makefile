# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: install
	@if [ -n "$(OOMKB_ENABLE_ESTIMATE)" ] && [ "$(OOMKB_ENABLE_ESTIMATE)" != "0" ] && [ "$(OOMKB_ESTIMATE_SANDBOX)" != "none" ] && ! command -v bwrap >/dev/null 2>&1; then \
	  echo "note: OOMKB_ENABLE_ESTIMATE is set but bubblewrap is missing, so /v1/estimate will answer 503."; \
	  echo "      Install it (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap)"; \
	  echo "      or accept running submitted programs unisolated with OOMKB_ESTIMATE_SANDBOX=none."; \
	fi
	$(BIN)/oomkb index
	$(BIN)/oomkb serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/retrieval.py

clean:
	rm -rf $(VENV) build *.egg-info
