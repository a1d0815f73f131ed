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

.PHONY: demo test install install-dev lint bench clean docs

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

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
	$(BIN)/bayescrl demo --out runs/demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -n 2

# The documentation site (mkdocs-material + mkdocstrings), warnings as errors, into site/.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bayescrl tests benchmarks examples

clean:
	rm -rf $(VENV) runs .pytest_cache site
