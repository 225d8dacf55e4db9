"""A deterministic generator and answer judge for testing the answer replay's rules: it answers from
the words on the page, so a test knows what each context must produce.

- answering: the text of the first memory line (after its number, mark and time), the first
  evidence unit's value, or the first verified fact; "I do not know" with no memory; `empty` makes
  every answer to a question containing that word blank;
- the parser: the reply scripted for the text (`replies`: text -> list of replies, one per call);
- judging: accuracy +4 ("4") when every word of the expected answer is in the answer, else -4
  ("0"); adoption as `adopt(answer, claim)` says (default: they share a content word); authority
  yes when the answer shares a content word
  with the verified facts; conflict yes when `conflict(record, correction)` says so; the
  equivalence question yes when `same` holds the pair.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from derivaudit.models.base import Backend, Prompt, Score, Usage

_WORD = re.compile(r"[a-z0-9]+")
STOP = {"the", "a", "an", "is", "to", "of", "and", "in", "on", "at", "does", "what", "which", "for", "maya",
        "her", "s", "how", "each", "do", "i", "not", "know"}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP}


def _field(text: str, name: str) -> str:
    m = re.search(rf"{name}: <record>(.*?)</record>", text, re.S)
    return m.group(1) if m else ""


def _yes(hit: bool, top: str | None = None) -> Score:
    t = top or ("yes" if hit else "no")
    return Score(4.0 if hit else -4.0, -0.1 if hit else -4.1, -4.1 if hit else -0.1, top=[(t, -0.1)])


class Scripted(Backend):
    name = "scripted"

    def __init__(self, replies: dict[str, list[str]] | None = None, *, empty: str | None = None,
                 conflict: Callable[[str, str], bool] = lambda rec, cor: True,
                 same: set[tuple[str, str]] | None = None,
                 adopt: Callable[[str, str], bool] = lambda answer, claim: bool(words(answer) & words(claim)),
                 ignore_verified: bool = False) -> None:
        self.usage = Usage()
        self.replies = replies or {}
        self.empty = empty
        self.conflict = conflict
        self.same = same or set()
        self.adopt = adopt
        self.ignore_verified = ignore_verified  # a generator that ignores the directive to prefer them
        self.generated: list[Prompt] = []
        self.scored: list[Prompt] = []

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name}

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 256, json_schema: Any = None,
                 stop: Sequence[str] = ()) -> list[str]:
        out = []
        for p in prompts:
            self.generated.append(p)
            text = p.text
            if "evidence units" in text:
                src = re.search(r"<record>(.*?)</record>", text, re.S).group(1)
                queue = self.replies.get(src, ["not json"])
                out.append(queue.pop(0) if len(queue) > 1 else queue[0])
                continue
            q = re.search(r"Question: (.*)", text).group(1)
            if self.empty and self.empty in q:
                out.append("   ")
                continue
            facts = re.search(r"Verified current facts:\n\[1\] (?:\(.*?\) )?(.*)", text)
            mem = re.search(r"\[\d\] (?!\[verified)(?:\(.*?\) )?(.*)" if self.ignore_verified
                            else r"\[1\] (?:\[verified current\] )?(?:\(.*?\) )?(.*)", text)
            unit = re.search(r"Memory evidence:\n- [^:]+: (.*)", text)
            out.append(facts.group(1) if facts else mem.group(1) if mem else unit.group(1) if unit
                       else "I do not know")
        return out

    def score(self, prompts: Sequence[Prompt], k: int = 100) -> list[Score]:
        out = []
        for p in prompts:
            self.scored.append(p)
            t = p.text
            if "Grade an answer" in t:
                hit = words(_field(t, "Verified answer")) <= words(_field(t, "Answer given"))
                out.append(_yes(hit, "4" if hit else "0"))
            elif "earlier, superseded claim" in t:
                out.append(_yes(self.adopt(_field(t, "Answer given"), _field(t, "Earlier claim"))))
            elif "Verified current facts:" in t:
                out.append(_yes(bool(words(_field(t, "Answer given")) & words(_field(t, "Verified current facts")))))
            elif "verified correction and an older" in t:
                out.append(_yes(self.conflict(_field(t, "Older record"), _field(t, "Correction"))))
            elif "evidence labels" in t:
                a = re.search(r"A: <record>(.*?)</record>", t).group(1)
                b = re.search(r"B: <record>(.*?)</record>", t).group(1)
                out.append(_yes((a, b) in self.same))
            else:
                raise AssertionError(f"unexpected prompt: {t[:80]}")
        return out
