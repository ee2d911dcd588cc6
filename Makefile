# The README's two commands: `make demo` and `make test`. Each bootstraps .venv by itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench fuzz clean venv system-tools settings-tables

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/actorbus demo calculator --duration 5

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks demos fuzz
	$(VENV)/bin/ruff format --check src tests benchmarks demos fuzz
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/private_reach.py --max 72

# The suite needs Graphviz, iproute2, iptables, Chromium and OpenSSL besides Python's packages: installed
# here when missing (root + apt-get), else named on one line and the tests needing them fail.
system-tools:
	tools/ensure-system-tools.sh

test: system-tools lint
	$(PY) -m pytest -q

# docs/configuration.md's settings tables, generated from actorbus.config.settings
settings-tables: $(STAMP)
	PYTHONPATH=src $(PY) tools/settings_table.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# A longer fuzz run than CI's (docs/reliability.md): FUZZ_SECONDS in total.
FUZZ_SECONDS ?= 900
fuzz: $(STAMP)
	$(PY) fuzz/run_ci.py --budget $(FUZZ_SECONDS) --corpus .fuzz-corpus

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
