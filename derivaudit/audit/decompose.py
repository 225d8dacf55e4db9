"""Semantic obligations (DerivAudit, §3.2): a memory record decomposed by the model into the facts,
relations and qualifiers it asserts, read line by line with rules that drop what the record does
not say (a relation it draws no link word for, a modality it does not state)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from string import Template
from typing import Any

from .. import templates
from ..log.records import Write
from ..models.base import Backend, Prompt
from .evidence import STOP_WORDS, tokenize
from .labels import MEMORY_PRECEDENCE, OBLIGATION_LABELS, memory_label, obligation_label  # noqa: F401

OBLIGATION_KINDS = ("fact", "relation", "qualifier")
RELATION_TYPES = ("cause", "purpose", "support-for", "part-of", "sequence", "comparison", "other")
QUALIFIER_TYPES = ("timing", "modality", "quantity", "attribution")

_LINE = re.compile(
    r"^\s*(?:[-*\u2022]|\d+[.)])?\s*(FACT|RELATION|QUALIFIER)\s*(?:\(\s*([^)]*?)\s*\))?\s*:\s*(.+?)\s*$", re.I
)
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*$")




@dataclass(frozen=True)
class Obligation:
    obligation_id: str
    write_id: str
    kind: str
    subtype: str | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class DecompositionError(ValueError):
    pass


def parse_obligations(write: Write, text: str, dropped: list[str] | None = None) -> list[Obligation]:
    """Validate a generated obligation list: typed lines only, known subtypes, at least one fact.
    A line that is not about the record (no shared content word, or a name the record does not
    mention: a weak model copying the few-shot examples) is left out and appended to `dropped`.
    Raises DecompositionError."""
    record_tokens = tokenize(write.text)
    record_words = set(record_tokens)
    found: list[tuple[str, str | None, str]] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if _FENCE.match(line):
            continue
        if not line or line.lower().startswith("record:"):
            if found:
                break  # the list ends at the first blank line or the next example
            continue
        m = _LINE.match(line)
        if m is None:
            raise DecompositionError(f"line {n} is not an obligation: {line[:80]!r}")
        kind, sub, body = m.group(1).lower(), (m.group(2) or "").strip().lower() or None, m.group(3)
        if kind == "relation":
            sub = sub or "other"
            if sub not in RELATION_TYPES:
                raise DecompositionError(f"line {n}: unknown relation type {sub!r} (use one of {RELATION_TYPES})")
        elif kind == "qualifier":
            if sub not in QUALIFIER_TYPES:
                raise DecompositionError(f"line {n}: qualifier type {sub!r} is not one of {QUALIFIER_TYPES}")
        elif sub is not None:
            raise DecompositionError(f"line {n}: a FACT takes no type, got {sub!r}")
        if not _grounded(body, write.text, record_words):
            if dropped is not None:
                dropped.append(line)
            continue
        found.append((kind, sub, body))
    unique = list(dict.fromkeys(found))
    unique = _drop_one_sided_relations(unique, dropped)
    if not any(k == "fact" for k, _, _ in unique):
        raise DecompositionError("no FACT obligation about this record (each must share a content word with it)")
    said = {_stem(w) for _, _, body in unique for w in tokenize(body)}
    left = list(dict.fromkeys(w for w in record_tokens if _stem(w) not in said))
    if left:  # a lost word is a lost claim, and often the unsupported one ("because her doctor told her")
        raise DecompositionError(f"the obligations leave out what the record says with: {', '.join(left[:8])}")
    numbered = [Obligation(f"{write.write_id}#o{i}", write.write_id, k, s, b) for i, (k, s, b) in enumerate(unique, 1)]
    return _drop_unsaid_modality(_drop_undrawn_relations(numbered, write.text, dropped), write.text, dropped)


_NAME = re.compile(r"\b[A-Z][\w'-]*")
# The words a relation line uses to state the link itself ("X is the reason Y", "X is meant to Y").
_RELATION_WORDS = frozenset(_w for _w in (
    "reason", "meant", "part", "support", "supported", "supports", "cause", "caused", "causes", "purpose",
    "link", "linked", "related", "result", "resulted", "led", "lead", "leads", "due", "thanks", "goal"))


def _drop_one_sided_relations(found: list[tuple[str, str | None, str]],
                              dropped: list[str] | None) -> list[tuple[str, str | None, str]]:
    """A RELATION is a link the record draws between two claims (the decomposition prompt's own
    definition). A relation line whose content, beside its linking words, is all in one other
    obligation links that claim to nothing ("The new job is the reason Andrew started a new job",
    "RELATION (sequence): Andrew started his job in February 2023"): it is left out (kept in
    `dropped`), and the claim it repeats stays audited as that obligation."""
    def stems(body: str) -> set[str]:
        return {_stem(w) for w in tokenize(body) if w not in _RELATION_WORDS}

    own = [stems(body) for _, _, body in found]
    keep = []
    for i, (kind, sub, body) in enumerate(found):
        if kind == "relation" and any(j != i and found[j][0] != "relation" and own[i] <= own[j]
                                      for j in range(len(found))):
            if dropped is not None:
                dropped.append(f"RELATION ({sub}): {body}  [links one claim to nothing: it repeats another line]")
            continue
        keep.append((kind, sub, body))
    return keep


# The version of how a generated obligation list is read: part of the obligations stage's fingerprint,
# so a run read under other rules is re-read (the generations come from the result cache).
PARSE_RULES = "undrawn-relations-1, unsaid-modality-1"
_LOWER_WORD = re.compile(r"[a-z]+")
# The words by which a record draws each type of link. A type not listed ("other") is always kept.
LINK_WORDS: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    "cause": "because since so for due thanks cause caused causes causing reason why result resulted led lead "
             "leads therefore after made inspired motivated",
    "purpose": "to for so order aim aims goal meant intend intended intends help helps helped hope hopes plan "
               "plans planning",
    "support-for": "support supported supports supporting backed back backing help helped helps thanks through "
                   "by with via using use used",
    "part-of": "part of in at on with among include includes including within during",
    "sequence": "then after before later since when while until ago first next once followed earlier during",
    "comparison": "than more less most least better best worse worst like unlike same different compared "
                  "similar as",
}.items()}


def _drop_undrawn_relations(obligations: list[Obligation], record_text: str,
                            dropped: list[str] | None) -> list[Obligation]:
    """A RELATION is a link the record draws (the decomposition prompt's definition). A relation line
    of a type whose linking words the record never uses ("The producer's advice is the reason Calvin
    stayed true to himself", from "At a festival, a producer advised Calvin to stay true to himself":
    no because, so, led, ...) is the decomposer's inference, not the record's claim, and an audit of it
    calls a true record unsupported. It is left out (kept in `dropped`) only when every word of the
    record it says is said by another obligation too, so that no claim of the record goes unaudited.
    Obligation ids keep their numbers (the adjudicator's seeded order and the result cache follow
    them)."""
    used = set(_LOWER_WORD.findall(record_text.lower()))  # stop words too: "to", "for", "so" link

    def undrawn(o: Obligation) -> str | None:
        words = LINK_WORDS.get(o.subtype or "") if o.kind == "relation" else None
        if words is None or words & used:
            return None
        return f"RELATION ({o.subtype}): {o.text}  [a link the record does not draw: it uses no {o.subtype} word]"

    return _drop_said_elsewhere(obligations, record_text, dropped, undrawn)


def _drop_said_elsewhere(obligations: list[Obligation], record_text: str, dropped: list[str] | None,
                         why: Callable[[Obligation], str | None]) -> list[Obligation]:
    """Leave out each obligation `why` names a reason for (appended to `dropped`), but only while
    the obligations kept say every record word it says: no claim of the record goes unaudited."""
    keep = list(obligations)
    record = stems(record_text)
    for o in obligations:
        if (reason := why(o)) is None:
            continue
        rest = {_stem(w) for x in keep if x is not o for w in tokenize(x.text)}
        if (stems(o.text) & record) <= rest:
            keep.remove(o)
            if dropped is not None:
                dropped.append(reason)
    return keep


# The words by which a record hedges a claim: that it is only planned, hoped for, considered, possible
# or uncertain (the decomposition prompt's modality qualifier, "only when the record says so").
_MODAL = """
plan plans planned planning hope hopes hoped hoping want wants wanted wanting wish wishes wished would
consider considers considered considering think thinks thinking might may maybe perhaps possibly
possible probably likely unlikely could will going intend intends intended intending aim aims aiming
dream dreams dreaming try tries tried trying expect expects expected expecting uncertain unsure if
someday soon upcoming future goal goals aspire aspires aspiring wonder wondering should seem seems
seemed appear appears apparently supposedly allegedly potential potentially tentative tentatively
interested eager looking about idea ideas only just yet hopefully attempt attempting"""
MODAL_WORDS = frozenset(_MODAL.split())


def _drop_unsaid_modality(obligations: list[Obligation], record_text: str,
                          dropped: list[str] | None) -> list[Obligation]:
    """A modality qualifier says a claim is only planned, hoped for or uncertain, "only when the
    record says so" (the decomposition prompt's definition). One from a record that uses no hedging
    word ("The doctor's statement is only said", from "Sam's doctor said his weight is a serious
    health risk") is the decomposer copying its example, not the record's claim: audited, it calls a
    true record unsupported, and a later turn that makes the claim certain reads as superseding it.
    Left out (kept in `dropped`) on the same terms as an undrawn relation: only when every word of
    the record it says is said by another obligation too."""
    if MODAL_WORDS & set(_LOWER_WORD.findall(record_text.lower())):
        return obligations

    def unsaid(o: Obligation) -> str | None:
        hedges = MODAL_WORDS & set(_LOWER_WORD.findall(o.text.lower()))
        if o.kind != "qualifier" or o.subtype != "modality" or not hedges:
            return None  # a line that hedges nothing restates a claim of the record: it is audited as one
        return f"QUALIFIER (modality): {o.text}  [a hedge the record does not make: it uses no modal word]"

    return _drop_said_elsewhere(obligations, record_text, dropped, unsaid)


def _stem(word: str) -> str:
    """Crude suffix stripping, enough to see 'moved' and 'moving' as one word."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    """The stems of a text's content words: what two texts share, whatever the word forms."""
    return {_stem(w) for w in tokenize(text)}


@functools.cache
def _example_stems() -> frozenset[str]:
    """Content words of the decomposition prompt's example records (its 'Record:' lines)."""
    lines = [x[len("Record:"):].replace("<record>", " ").replace("</record>", " ")
             for x in templates.load("decompose").splitlines() if x.startswith("Record:") and "$" not in x]
    return frozenset(_stem(w) for x in lines for w in tokenize(x))


def _grounded(obligation: str, record: str, record_words: set[str]) -> bool:
    """About this record: shares a content word with it, names no one and nothing (a capitalised
    word) that the record does not mention, and takes no content word from the prompt's example
    records that the record lacks (a 1.5B model wrote 'after they have finished running two
    marathons' into a record about a move)."""
    words = tokenize(obligation)
    if record_words and record_words.isdisjoint(words):
        return False
    own = {_stem(w) for w in record_words}
    if any(_stem(w) in _example_stems() and _stem(w) not in own for w in words):
        return False
    lower = record.lower()
    return all(n.lower() in lower or n.lower() in STOP_WORDS for n in _NAME.findall(obligation))


@dataclass
class Decomposition:
    write_id: str
    obligations: list[Obligation]
    status: str  # ok | retried | fallback
    error: str | None = None
    raw: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # generated lines not about the record

    def to_dict(self) -> dict[str, Any]:
        return {"write_id": self.write_id, "status": self.status, "error": self.error, "raw": self.raw,
                "dropped": self.dropped, "obligations": [o.to_dict() for o in self.obligations]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Decomposition:
        return cls(d["write_id"], [Obligation(**o) for o in d["obligations"]], d["status"], d["error"], d["raw"],
                   d.get("dropped", []))


ANSWER_PREFIX_DECOMPOSE = "FACT:"
STOP_DECOMPOSE = ("\n\n", "\nRecord:")


def decompose(backend: Backend, writes: Sequence[Write], *, max_new_tokens: int = 96,
              on_done: Callable[[int], None] | None = None) -> list[Decomposition]:
    """Greedy generation, validated; an invalid answer is retried once with the validation error.
    A memory that still fails keeps the whole record as its single FACT obligation, marked
    status='fallback' with the error, so it is audited and counted, never silently dropped."""

    instructions = templates.load("decompose")
    head, _, tail = instructions.partition("$note")  # the instructions and examples are shared

    def ask(ws: Sequence[Write], notes: Sequence[str]) -> list[str]:
        prompts = [Prompt(head, note + Template(tail).substitute(record=templates.quoted(templates.line(w.text))),
                          answer_prefix=ANSWER_PREFIX_DECOMPOSE) for w, note in zip(ws, notes, strict=True)]
        gens = backend.generate(prompts, max_new_tokens=max_new_tokens, stop=STOP_DECOMPOSE)
        return [ANSWER_PREFIX_DECOMPOSE + g for g in gens]

    def attempt(w: Write, text: str, raw: list[str], status: str) -> Decomposition:
        """The parsed answer, or status 'failed' with no obligations, its error and the lines left out
        as not about the record (they often explain the error)."""
        dropped: list[str] = []
        try:
            return Decomposition(w.write_id, parse_obligations(w, text, dropped), status, raw=raw, dropped=dropped)
        except DecompositionError as e:
            return Decomposition(w.write_id, [], "failed", error=str(e), raw=raw, dropped=dropped)

    first = ask(writes, [""] * len(writes))
    results = [attempt(w, t, [t], "ok") for w, t in zip(writes, first, strict=True)]
    retry = [i for i, r in enumerate(results) if r.status == "failed"]
    if retry:
        notes = [templates.render("decompose_retry", error=results[i].error) for i in retry]
        again = ask([writes[i] for i in retry], notes)
        for i, text in zip(retry, again, strict=True):
            w = writes[i]
            r = attempt(w, text, [first[i], text], "retried")
            if r.status == "failed":  # the retry's error and dropped lines stay beside the whole record
                r = replace(r, obligations=[Obligation(f"{w.write_id}#o1", w.write_id, "fact", None, w.text)],
                            status="fallback")
            results[i] = r
    if on_done:
        on_done(len(writes))
    return results
