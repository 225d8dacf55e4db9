"""The optional extras (pyproject's optional-dependencies): what each brings, and the one message
a user reads when a feature needs an extra that is not installed."""

from __future__ import annotations

EXTRAS = {
    "vllm": "vLLM on a GPU machine",
    "llamacpp": "llama-cpp-python (it compiles llama.cpp; see the README)",
    "serve": "starlette and uvicorn",
}


def missing(what: str, extra: str, error: ImportError) -> str:
    """`what` cannot run without `extra`: the message names the extra and the import that failed."""
    return f"{what} needs {EXTRAS[extra]}: pip install 'derivaudit[{extra}]' (import failed: {error})"
