# One virtual environment in .venv; every target installs what it needs first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/derivaudit validate fixtures/memories.jsonl
	$(BIN)/derivaudit views fixtures/memories.jsonl --write boston-2 --write academy-1

test: install
	$(BIN)/ruff check derivaudit tests benchmarks
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python benchmarks/bench_views.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
