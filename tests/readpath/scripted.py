"""A deterministic generator and answer judge for testing the answer replay's rules: it answers from
the words on the page, so a test knows what each context must produce.

- answering: the text of the first memory line (after its number, mark and time), the first
  evidence unit's value, or the first verified fact; "I do not know" with no memory; `empty` makes
  every answer to a question containing that word blank; `stale` (question word -> answer) is an
  old answer repeated whatever the memories say, except from verified facts alone;
- the parser: the reply scripted for the text (`replies`: text -> list of replies, one per call);
- judging: accuracy +4 ("4") when every word of the expected answer is in the answer, else -4
  ("0"); adoption as `adopt(answer, claim)` says (default: they share a content word); the
  authority contradicts an answer that holds a `topic` word and none of the facts' other words;
  conflict yes when `conflict(record, correction)` says so; the
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
                 stale: dict[str, str] | None = None, topic: set[str] | None = None) -> None:
        self.usage = Usage()
        self.replies = replies or {}
        self.empty = empty
        self.conflict = conflict
        self.same = same or set()
        self.adopt = adopt
        self.stale = stale or {}  # question word -> an old answer the generator repeats from its own prior
        self.topic = topic or set()  # what the authority check reads a contradiction of
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
            old = next((a for word, a in self.stale.items() if word in q), None)
            if old and not facts:
                out.append(old)
                continue
            mem = re.search(r"\[1\] (?:\[verified current\] )?(?:\(.*?\) )?(.*)", text)
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
                assert p.verdict == (("3", "4"), ("0", "1", "2")), "the grade is read as p(3 or 4) against p(0-2)"
                hit = words(_field(t, "Verified answer")) <= words(_field(t, "Answer given"))
                out.append(_yes(hit, "4" if hit else "0"))
            elif "earlier, superseded claim" in t:
                out.append(_yes(self.adopt(_field(t, "Answer given"), _field(t, "Earlier claim"))))
            elif "Verified current facts:" in t:  # contradicted: it names the topic but not the facts' words
                ans, facts = words(_field(t, "Answer given")), words(_field(t, "Verified current facts"))
                out.append(_yes(bool(ans & self.topic) and not ans & facts - self.topic))
            elif "verified correction and an older" in t:
                out.append(_yes(self.conflict(_field(t, "Older record"), _field(t, "Correction"))))
            elif "evidence labels" in t:
                a = re.search(r"A: <record>(.*?)</record>", t).group(1)
                b = re.search(r"B: <record>(.*?)</record>", t).group(1)
                out.append(_yes((a, b) in self.same))
            else:
                raise AssertionError(f"unexpected prompt: {t[:80]}")
        return out
