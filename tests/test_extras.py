"""The optional extras named in messages are the ones pyproject declares, and a missing one says so."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

from derivaudit.extras import EXTRAS, missing

ROOT = Path(__file__).resolve().parent.parent


def test_every_extra_named_in_a_message_is_declared_in_pyproject():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared), sorted(set(EXTRAS) - set(declared))


def test_the_message_names_the_extra_and_the_failed_import():
    msg = missing("the vllm backend", "vllm", ImportError("No module named 'vllm'", name="vllm"))
    assert msg == ("the vllm backend needs vLLM on a GPU machine: pip install 'derivaudit[vllm]' "
                   "(import failed: No module named 'vllm')")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_choosing_a_backend_whose_extra_is_absent_names_the_install_command():
    from derivaudit.models import BackendError, load_backend

    with pytest.raises(BackendError, match=r"pip install 'derivaudit\[vllm\]' \(import failed: "):
        load_backend("vllm", "any-model", cache=False)
