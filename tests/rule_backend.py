"""A deterministic verifier for testing the annotation protocol's decisions: it answers from the
words on the page, not from a language model, so a test can know what the right answer is.

Score: +4 when every content word of the statement (after "Statement:"/"Claim:"/"Obligation:")
appears in the evidence block before it, else -4; the R question (a choice read for "false")
gets +4 only when the evidence contains "never" next to the statement's first word; the slot
check ("Its quantity: five years") gets +4 when the evidence holds every other content word of the
statement and a different value of that slot. The subset answer is scripted per test
(`subset_answer`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from derivaudit.audit import slots
from derivaudit.models.base import Backend, Prompt, Score, Usage

_WORD = re.compile(r"[a-z0-9]+")
STOP = {"the", "a", "an", "is", "to", "of", "and", "in", "on", "at", "that", "was", "has", "have", "her", "his"}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP}


class RuleBackend(Backend):
    name = "rule"

    def __init__(self, subset_answer: str = "1") -> None:
        self.usage = Usage()
        self.subset_answer = subset_answer
        self.seen: list[Prompt] = []
        self.generated: list[Prompt] = []  # the prompts of generate (subset answers)

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "model": "rule"}

    def _statement(self, task: str) -> str:
        m = re.search(r"(?:Statement|Claim|Obligation): (.*)", task)
        return m.group(1) if m else task

    def score(self, prompts: Sequence[Prompt], k: int = 100) -> list[Score]:
        out = []
        for p in prompts:
            self.seen.append(p)
            st = words(self._statement(p.task))
            evidence = words(p.shared)
            false_q = p.verdict[0] != ("yes",)  # the three-way R question, read for "false"
            if not p.shared:  # D: determinate
                out.append(Score(4.0, -0.1, -4.1))
                continue
            slot = re.search(r"^(?:Its|The) (time|place|quantity|person)(?: it states)?: (.*)$", p.task, re.M)
            if slot:
                name, value = slot.groups()
                passages = re.sub(r"^\[\d+\]", "", p.shared.split("\n", 1)[-1], flags=re.M)  # not the numbers
                said = {v.lower() for v in slots.values(passages, name)}
                rest = st - words(value)
                hit = bool(rest) and rest <= evidence and bool(said - {value.lower()})
                out.append(Score(4.0 if hit else -4.0, -0.1 if hit else -4.1, -4.1 if hit else -0.1))
                continue
            hit = bool(st) and st <= evidence
            if false_q:
                hit = hit and "never" in evidence
            out.append(Score(4.0 if hit else -4.0, -0.1 if hit else -4.1, -4.1 if hit else -0.1))
        return out

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 256, json_schema: Any = None,
                 stop: Sequence[str] = ()) -> list[str]:
        self.generated.extend(prompts)
        return [self.subset_answer for _ in prompts]
