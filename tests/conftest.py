from __future__ import annotations

import os
from pathlib import Path

import pytest

# The suite runs the pipeline on the fast embedded SmolLM2 through transformers unless a test picks
# another model; tests of the default model (Qwen2.5-Coder-1.5B on llama.cpp) say so explicitly.
os.environ.setdefault("DERIVAUDIT_BACKEND", "transformers")
os.environ.setdefault("DERIVAUDIT_MODEL", "smollm2")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def locomo_path() -> Path:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo not present at {LOCOMO}")
    return LOCOMO


@pytest.fixture(scope="session")
def synth_run(tmp_path_factory) -> Path:
    """A small synthetic scan + replay run folder (benchmarks/synth_run.py): real files, no model."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("synth_run", ROOT / "benchmarks" / "synth_run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make(tmp_path_factory.mktemp("synth") / "run", writes=40, conversations=4, seed=3, reps=200)
