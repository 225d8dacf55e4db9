"""Verification views: how a memory is put to the verifier, given one shared evidence block.

Memory, evidence and verifier stay fixed; only the view changes (seed 004, §3.2, App. J). Each view
is a prompt file `prompts/view_<name>.txt` registered here by name; every prompt of one memory
starts with the same evidence block (`prompts/evidence.txt`) so backends can share its prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import templates
from .models.base import Prompt
from .records import Turn

ANSWER_SUFFIX = "Answer with one word, yes or no."


@dataclass(frozen=True)
class View:
    name: str
    description: str

    def prompts(self, shared: str, **parts: Any) -> list[Prompt]:
        return [Prompt(shared=shared, task=templates.render(f"view_{self.name}", **parts))]


VIEWS: dict[str, View] = {}


def register(view: View) -> View:
    VIEWS[view.name] = view
    return view


register(View("holistic", "one question about the whole record"))


def passage_line(i: int, p: Turn | dict[str, Any]) -> str:
    get = p.get if isinstance(p, dict) else lambda k, _d=None: getattr(p, k, None)
    when = get("time")
    speaker = get("speaker") or ""
    head = f"[{i}]" + (f" ({when})" if when else "") + (f" {speaker}:" if speaker else "")
    return f"{head} {' '.join(str(get('text')).split())}"


def evidence_block(record: str, passages: Sequence[Turn | dict[str, Any]]) -> str:
    """The shared prefix: numbered passages in the order given (callers pass time order)."""
    lines = "\n".join(passage_line(i, p) for i, p in enumerate(passages, start=1)) or "(no passages)"
    return templates.render("evidence", passages=lines, record=" ".join(record.split()))


def get_view(name: str) -> View:
    if name not in VIEWS:
        raise KeyError(f"unknown view {name!r} (known: {', '.join(VIEWS)})")
    return VIEWS[name]
