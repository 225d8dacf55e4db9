from __future__ import annotations

from pathlib import Path

import pytest

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
