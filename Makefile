# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test test-quick test-oldest-jax bench bytecode lock clean

# Everything (all extras) at the exact versions of constraints.txt; pyproject.toml keeps ranges.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[all,test]"
	touch $(STAMP)

install: $(STAMP)

run: install
	@if [ -n "$(OOMKB_ENABLE_ESTIMATE)" ] && [ "$(OOMKB_ENABLE_ESTIMATE)" != "0" ] && [ "$(OOMKB_ESTIMATE_SANDBOX)" != "none" ] && ! command -v bwrap >/dev/null 2>&1; then \
	  echo "note: OOMKB_ENABLE_ESTIMATE is set but bubblewrap is missing, so /v1/estimate will answer 503."; \
	  echo "      Install it (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap)"; \
	  echo "      or accept running submitted programs unisolated with OOMKB_ESTIMATE_SANDBOX=none."; \
	fi
	@$(MAKE) --no-print-directory bytecode
	$(BIN)/oomkb index
	$(BIN)/oomkb serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest

# The edit-run loop: everything but the tests marked slow (under 2 minutes on 2 cores).
test-quick: install
	$(BIN)/python -m pytest -m "not slow" -q

# The diagnostics against the oldest jax in pyproject.toml's range (its floor), in a light install:
# base + tpu + plot extras, everything else at constraints.txt's versions.
OLDEST_VENV := .venv-oldest-jax
OLDEST_JAX = $(shell sed -n 's/^ *"jax>=\([0-9.]*\)",.*/\1/p' pyproject.toml | head -1)
test-oldest-jax:
	test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	grep -v '^\(jax\|jaxlib\)==' constraints.txt > $(OLDEST_VENV)/constraints.txt
	$(OLDEST_VENV)/bin/python -m pip install --quiet -c $(OLDEST_VENV)/constraints.txt \
	  "jax==$(OLDEST_JAX)" "jaxlib==$(OLDEST_JAX)" -e ".[tpu,plot,test]"
	$(OLDEST_VENV)/bin/python -c "import jax; assert jax.__version__ == '$(OLDEST_JAX)', jax.__version__"
	$(OLDEST_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/diagnostics/test_program.py tests/diagnostics/test_estimate.py \
	  tests/diagnostics/test_plan.py tests/diagnostics/test_light_install.py

bench: install bytecode
	$(BIN)/python benchmarks/retrieval.py

# The editable install leaves oomkb's own modules uncompiled (a wheel install compiles them):
# compiled once here, every `oomkb` command starts ~0.1 s sooner. Only changed files recompile.
bytecode:
	$(BIN)/python -m compileall -q oomkb docs_src diagnostics indexer kb api

# Refresh constraints.txt from the installed environment (after changing pyproject.toml ranges).
lock: install
	{ echo "# The exact versions that make run, make test and CI install (pip install -c constraints.txt ...)."; \
	  echo "# pyproject.toml holds the ranges; regenerate this file with: make lock"; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^oomkb' | sed 's/^torch==\([0-9.]*\)+cpu$$/torch==\1/'; \
	} > constraints.txt

clean:
	rm -rf $(VENV) $(OLDEST_VENV) build *.egg-info
