# Set-up and entry points. `make demo` and `make test` work on a fresh clone with only Python 3.11.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export MPLBACKEND ?= Agg

.PHONY: demo test test-long install install-dev lint bench clean docs lock browser

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -c constraints.txt --upgrade pip setuptools wheel

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) install -c constraints.txt torch==2.13.0
	$(PIP) install -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install -c constraints.txt -e ".[dev]"
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(PIP) install -c constraints.txt -e ".[docs]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(BIN)/bayescrl demo --out runs/demo --force

test: $(VENV)/.installed-dev browser
	$(BIN)/python -m pytest -q -n 2 -m "not long"

# The long checks `make test` leaves out (full-episode MJX Ant parity, a GPU-table run on CPU JAX).
test-long: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -n 2 -m long

# The system chromium that the label-page test drives (Debian's package; playwright never downloads a browser).
# Where apt-get is unavailable or we are not root, that one test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "note: no system chromium (apt-get install chromium); the browser test will skip"

# The documentation site (mkdocs-material + mkdocstrings), warnings as errors, into site/.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bayescrl tests benchmarks examples

# Refresh the lock: constraints.txt pins every package of every extra (pip-compile over pyproject.toml and
# constraints.in), keeping the current pins where they still fit; `make lock UPGRADE=1` moves each to its
# newest release. Users get the loose ranges of pyproject.toml; local installs and CI install from the lock.
lock:
	$(PY) -m venv .venv-lock && .venv-lock/bin/python -m pip install -q "pip-tools>=7.4,<8"
	CUSTOM_COMPILE_COMMAND="make lock" .venv-lock/bin/pip-compile -q --all-extras --strip-extras --allow-unsafe \
	  --no-emit-index-url --no-emit-find-links $(if $(UPGRADE),--upgrade) -o constraints.txt pyproject.toml constraints.in
	sed -i '/^bayescrl @ /d' constraints.txt  # the package itself (its own extras refer to it)

clean:
	rm -rf $(VENV) .venv-lock runs .pytest_cache site
