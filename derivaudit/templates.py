"""Prompt text files: found in the installed package (`derivaudit/prompts/`, put there by the
wheel build) or, in a source checkout, in the repository's top-level `prompts/`.

Placeholders are `$name` (string.Template), so JSON examples with braces need no escaping.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

_HERE = Path(__file__).resolve().parent


def prompt_dir() -> Path:
    for d in (_HERE / "prompts", _HERE.parent / "prompts"):
        if d.is_dir():
            return d
    raise FileNotFoundError("derivaudit's prompts/ folder is missing from this installation")


@cache
def load(name: str) -> str:
    path = prompt_dir() / f"{name}.txt"
    if not path.exists():
        raise FileNotFoundError(f"no prompt file {path.name} in {path.parent}")
    return path.read_text("utf-8")


def render(name: str, **fields: str) -> str:
    return Template(load(name)).substitute(fields)
