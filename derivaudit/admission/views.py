"""Verification views: how a memory is put to the verifier, given one shared evidence block.

Memory, evidence and verifier stay fixed; only the view changes (DerivAudit, §3.2, App. J). Each view
is a prompt file `derivaudit/prompts/view_<name>.txt` plus a few lines here saying how the memory is split
into parts (one prompt per part) and registered by name. Every prompt of one memory starts with
the same evidence block (`derivaudit/prompts/evidence.txt`) so backends can share its prefix, and ends with
"Answer with one word, yes or no."

To add a view: write `derivaudit/prompts/view_mine.txt` with the placeholders you need and call
`register(View("mine", "what it asks", parts=lambda m: [{"claim": ...}], split=True))`. A plugin
package declares a `View` with its prompt text in `template` (ending in "Answer with one word, yes
or no.") as an entry point of the group `derivaudit.views`; it is imported only when chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import templates
from ..log import timeref
from ..log.records import Turn
from ..models.base import Prompt
from ..registry import Registry

ANSWER_SUFFIX = "Answer with one word, yes or no."


@dataclass(frozen=True)
class Memory:
    """What a view may use: the record, its obligations (kind, text), and its QA pairs."""

    record: str
    obligations: Sequence[tuple[str, str]] = ()  # (kind, text): kind is fact | relation | qualifier
    qa: Sequence[tuple[str, str]] = ()  # (question, the record's answer)

    @property
    def claims(self) -> list[str]:
        """The atomic claims: the fact obligations, or the record itself when there are none."""
        facts = [t for k, t in self.obligations if k == "fact"]
        return facts or [self.record]


def _bullets(xs: Sequence[str]) -> str:
    return "\n".join(f"- {x}" for x in xs)


@dataclass(frozen=True)
class View:
    name: str
    description: str
    parts: Callable[[Memory], list[dict[str, str]]] = field(default=lambda m: [{}])
    split: bool = False  # several parts, combined into one score (minimum by default)
    needs_qa: bool = False  # its parts read the record's QA pairs (asked of the model first)
    needs_obligations: bool = False  # its parts read the obligations (decomposed by the model first)
    template: str | None = None  # the prompt text itself (a plugin's); None: derivaudit/prompts/view_<name>.txt

    def prompts(self, shared: str, memory: Memory | None = None) -> list[Prompt]:
        memory = memory or Memory(record="")
        return [Prompt(shared=shared, task=templates.fill(self.template, **fields) if self.template
                       else templates.render(f"view_{self.name}", **fields)) for fields in self.parts(memory)]


# The default view per purpose, each named once. The gate (admit(), serve, the noise probe) judges
# with the obligation view, the one DerivAudit decomposes a memory for; a one-off `check` asks the
# holistic question of the record as written (its default split is the record itself); `families
# run` compares the two.
GATE_VIEW = "obligation"
CHECK_VIEW = "holistic"
COMPARED_VIEWS = f"{CHECK_VIEW},{GATE_VIEW}"

VIEWS = Registry("view", group="derivaudit.views",
                 check=lambda obj: None if isinstance(obj, View) else "not a derivaudit.admission.View")


def register(view: View) -> View:
    return VIEWS.register(view.name, view)


register(View("holistic", "one question about the whole record"))
register(View("atomic", "one question per claim (fact obligation), combined", split=True,
              needs_obligations=True,
              parts=lambda m: [{"claim": c} for c in m.claims]))
register(View("residual", "what the record asserts beyond its listed claims",
              needs_obligations=True,
              parts=lambda m: [{"claims": _bullets(m.claims)}]))
register(View("composition", "the claims plus whatever connects them (composition graph)",
              needs_obligations=True,
              parts=lambda m: [{"claims": _bullets(m.claims)}]))
register(View("compact", "the record as claims and links, every line must hold (compact relations)",
              needs_obligations=True,
              parts=lambda m: [{"lines": _bullets([t for _, t in m.obligations] or [m.record])}]))
register(View("obligation", "the obligation-aware admission gate",
              needs_obligations=True,
              parts=lambda m: [{"obligations": _bullets([t for _, t in m.obligations] or [m.record])}]))
register(View("qa", "predicate-argument QA, one joint verdict", needs_qa=True,
              parts=lambda m: [{"qa": "\n".join(f"Q: {q} A: {a}" for q, a in m.qa) or f"Q: What is recorded? "
                                f"A: {m.record}"}]))
register(View("qa_each", "predicate-argument QA, one verdict per question, combined", split=True, needs_qa=True,
              parts=lambda m: [{"qa": f"Q: {q} A: {a}"} for q, a in m.qa] or [{"qa": f"Q: What is recorded? "
                                                                              f"A: {m.record}"}]))


def passage_line(i: int, p: Turn | dict[str, Any]) -> str:
    get = p.get if isinstance(p, dict) else lambda k, _d=None: getattr(p, k, None)
    when = get("time")
    speaker = get("speaker") or ""
    head = f"[{i}]" + (f" ({when})" if when else "") + (f" {speaker}:" if speaker else "")
    text = " ".join(str(get("text")).split())
    return f"{head} {timeref.annotate(text, when)}"


def evidence_block(record: str, passages: Sequence[Turn | dict[str, Any]]) -> str:
    """The shared prefix: numbered passages in the order given (callers pass time order)."""
    lines = "\n".join(passage_line(i, p) for i, p in enumerate(passages, start=1)) or "(no passages)"
    return templates.render("evidence", passages=lines, record=templates.line(record))


def get_view(name: str) -> View:
    return VIEWS.get(name)


def parse_views(text: str, *, one: bool = False) -> list[str]:
    """A `--view` value: a name, a comma list, or `all` (not with `one`), as registered names in the
    order given; ValueError naming each unknown one with the closest known names."""
    names = list(VIEWS) if text.strip() == "all" and not one else [v.strip() for v in text.split(",") if v.strip()]
    unknown = [VIEWS.unknown(v) for v in names if v not in VIEWS]
    if unknown:
        raise ValueError("; ".join(unknown))
    if not names:
        raise ValueError(f"--view names no view (known: {', '.join(VIEWS)})")
    if one and len(names) > 1:
        raise ValueError(f"--view takes one view here, not {', '.join(names)}")
    return names
