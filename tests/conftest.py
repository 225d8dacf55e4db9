from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The suite runs the pipeline on the fast embedded SmolLM2 through transformers unless a test picks
# another model; tests of the default model (Qwen2.5-Coder-1.5B on llama.cpp) say so explicitly.
os.environ.setdefault("DERIVAUDIT_BACKEND", "transformers")
os.environ.setdefault("DERIVAUDIT_MODEL", "smollm2")

# Tests never read or write the user's own home (~/.cache/derivaudit: result cache, assembled
# models): a suite that reads a warm cache hides its real cost. One fresh home per test run, so a
# model result may be reused within the run but never across runs; DERIVAUDIT_TEST_HOME names a
# persistent one on purpose (a developer rerunning one slow test).
if os.environ.get("DERIVAUDIT_TEST_HOME"):
    os.environ["DERIVAUDIT_HOME"] = os.environ["DERIVAUDIT_TEST_HOME"]
else:
    _home = tempfile.mkdtemp(prefix="derivaudit-test-home-")
    os.environ["DERIVAUDIT_HOME"] = _home
    atexit.register(shutil.rmtree, _home, ignore_errors=True)
os.environ.pop("DERIVAUDIT_CACHE", None)

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
    return mod.make(tmp_path_factory.mktemp("synth") / "run", writes=40, conversations=4, seed=3)


# The one model scan of the test run (test_scan, test_replay and test_report each redid their own):
# the hostile fixture (2 conversations, 4 writes, no gold) then the first 2 gold fixture writes, on
# the suite's model, calibrated on the hostile fixture's 7 turns (21 items; the whole log's 63 took
# 173 of the scan's 381 s, and no test reads the thresholds). A rescan that should resume passes
# SCAN_ARGS whole: another --limit or --calibrate-on is another run.
SCAN_INPUTS = (FIXTURES / "hostile.jsonl", FIXTURES / "memories.jsonl")
SCAN_LIMIT = 6
SCAN_ARGS = (*map(str, SCAN_INPUTS), "--limit", str(SCAN_LIMIT), "--calibrate-on", str(FIXTURES / "hostile.jsonl"))


@pytest.fixture(scope="session")
def fixture_scan(tmp_path_factory) -> tuple[Path, dict]:
    """(run folder, the scan's JSON report). Read it, or copy it with `copy_run` before changing it."""
    from typer.testing import CliRunner

    from derivaudit.cli import app

    run = tmp_path_factory.mktemp("fixture-scan") / "run"
    r = CliRunner().invoke(app, ["scan", *SCAN_ARGS, "-o", str(run), "--format", "json"])
    assert r.exit_code == 0, r.output
    return run, json.loads(r.stdout)


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
