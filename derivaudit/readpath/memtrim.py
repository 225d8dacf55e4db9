"""MemTrim (the MemTrim paper, §3 and App. A.1): memories as evidence units, a trie built at write time,
and the read-time rule that decides which evidence reaches the generator.

A memory m is (E_m, τ_m, H_m, o_m): evidence units (key, value), a task signature, the support set
H_m ⊆ E_m its stored outcome depends on, and the outcome. Units come from the log (`meta.evidence`:
`units` [[key, value], ...], `task`, `outcome`, `support`) or from `Parser`, the paper's fixed
instruction parser run on the memory's text with a model:

- canonicalisation: a key names the entity and its attribute (`highway_5.status`), its value type is
  kept beside it; a key not yet in the trie is compared with at most `CANDIDATES` existing keys of
  the same entity and type and merged with one the model calls equivalent, else kept apart (the
  conservative rule). Boolean, numeric and temporal values are normalised to one form (true/false;
  the number; the ISO date); free-text values of an existing key get the same equivalence check;
- grounding: each unit must quote a span of the source, and its value must be read in that source
  (its words, or the same number or date); a reply with ungrounded units or bad JSON is retried once
  with the problems named, then the ungrounded units are dropped (counted); a memory that still
  gives no valid reply keeps no units and its outcome is never reused;
- support: the units the parser marks as supporting the answer, all of them when it marks none (the
  paper's conservative policy).

`EvidenceIndex` is the trie: key → value → memories holding that unit (and whether it is in their
support set); identical units share a node, different values of one key branch under it. It is
built in write order (canonical keys depend on the keys already there), serialised with the run,
and `trim` looks the query's units up in it, restricted to the retrieved memories.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import templates
from ..audit.evidence import tokenize
from ..models.base import Backend, Prompt
from ..progress import in_parts

TYPES = ("boolean", "number", "time", "category", "text")
CANDIDATES = 3  # existing keys (or values) a new one is compared with before it is kept apart
_TRUE = {"true", "yes", "y", "open", "on"}
_FALSE = {"false", "no", "n", "closed", "off", "not"}


def normalise(text: Any) -> str:
    """Case, spaces, NFKC and end punctuation: the comparison form of any unit text."""
    return " ".join(unicodedata.normalize("NFKC", str(text or "")).casefold().split()).strip(" .!?")


def snake(text: str) -> str:
    return re.sub(r"[^\w]+", "_", normalise(text)).strip("_")


# ---------------------------------------------------------------- units and memories


@dataclass(frozen=True, order=True)
class Unit:
    """One evidence unit (key, value), compared after normalisation (case, spaces, NFKC)."""

    key: str
    value: str

    @classmethod
    def of(cls, key: Any, value: Any) -> Unit:
        return cls(normalise(key), normalise(value))


def evidence_of(meta: Mapping[str, Any] | None) -> Mapping[str, Any]:
    ev = (meta or {}).get("evidence")
    return ev if isinstance(ev, Mapping) else {}


@dataclass(frozen=True)
class Structured:
    """A memory (or a query) in evidence space: units, task signature, stored outcome, support set."""

    ident: str
    units: frozenset[Unit]
    task: str | None = None
    outcome: str | None = None
    support: frozenset[Unit] = frozenset()
    time: str | None = None

    @classmethod
    def from_meta(cls, ident: str, meta: Mapping[str, Any] | None, time: str | None = None) -> Structured | None:
        ev = evidence_of(meta)
        if not ev.get("units"):
            return None
        units = frozenset(Unit.of(*u) for u in ev["units"])
        support = frozenset(Unit.of(*u) for u in ev["support"]) if ev.get("support") is not None else units
        task = normalise(ev["task"]) if ev.get("task") else None
        return cls(ident, units, task, ev.get("outcome"), support & units, time)

    def to_dict(self) -> dict[str, Any]:
        return {"ident": self.ident, "units": [[u.key, u.value] for u in sorted(self.units)], "task": self.task,
                "outcome": self.outcome, "support": [[u.key, u.value] for u in sorted(self.support)],
                "time": self.time}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Structured:
        return cls(d["ident"], frozenset(Unit(*u) for u in d["units"]), d.get("task"), d.get("outcome"),
                   frozenset(Unit(*u) for u in d.get("support") or []), d.get("time"))


class EvidenceIndex:
    """The write-time trie: key -> value -> memories holding that unit (and whether it supports their
    outcome). Identical units share a node; different values of one key branch under it."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, dict[str, bool]]] = {}
        self.types: dict[str, str] = {}  # key -> value type, where the parser gave one
        self.memories: dict[str, Structured] = {}

    def add(self, m: Structured) -> None:
        self.memories[m.ident] = m
        for u in m.units:
            self.nodes.setdefault(u.key, {}).setdefault(u.value, {})[m.ident] = u in m.support

    def values(self, key: str, among: Iterable[str] | None = None) -> dict[str, set[str]]:
        """value -> memories holding it, restricted to `among` (the retrieved set) when given."""
        keep = set(among) if among is not None else None
        out = {v: {m for m in ms if keep is None or m in keep} for v, ms in self.nodes.get(key, {}).items()}
        return {v: ms for v, ms in out.items() if ms}

    def supports(self, unit: Unit, memory: str) -> bool:
        return self.nodes.get(unit.key, {}).get(unit.value, {}).get(memory, False)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "types": self.types,
                "memories": {i: m.to_dict() for i, m in self.memories.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EvidenceIndex:
        idx = cls()
        idx.types = dict(d.get("types") or {})
        for m in (d.get("memories") or {}).values():
            idx.add(Structured.from_dict(m))
        return idx


def load_index(path: Any) -> EvidenceIndex:
    """A trie saved with an earlier run (`overlap --answers --index`), checked field by field: a bad
    file is a ValueError naming the JSON path, never a half-read index."""
    from ..importers.common import read_json

    doc = read_json(path)
    where = str(path)
    mems = doc.get("memories") if isinstance(doc, dict) else None
    if not isinstance(mems, dict):
        raise ValueError(f"{where}: $.memories: expected an object of parsed memories")
    for ident, m in mems.items():
        at = f"{where}: $.memories[{ident!r}]"
        if not isinstance(m, dict) or m.get("ident") != ident:
            raise ValueError(f"{at}: expected an object whose ident is {ident!r}")
        for f in ("units", "support"):
            us = m.get(f, [])
            if not isinstance(us, list) or not all(isinstance(u, list) and len(u) == 2
                                                   and all(isinstance(x, str) for x in u) for u in us):
                raise ValueError(f"{at}.{f}: expected a list of [key, value] string pairs")
        for f in ("task", "outcome", "time"):
            if m.get(f) is not None and not isinstance(m[f], str):
                raise ValueError(f"{at}.{f}: expected a string or null")
    types = doc.get("types") or {}
    if not isinstance(types, dict) or not all(isinstance(v, str) for v in types.values()):
        raise ValueError(f"{where}: $.types: expected an object of key -> value type")
    return EvidenceIndex.from_dict(doc)


# ---------------------------------------------------------------- the read-time rule


@dataclass
class Trimmed:
    """What MemTrim passes on for one query, and why."""

    context: list[Unit]
    outcomes: dict[str, str]  # memory id -> keep | convert | suppress | none
    shared: dict[str, list[Unit]] = field(default_factory=dict)
    conflicting: dict[str, list[Unit]] = field(default_factory=dict)
    memory_only: dict[str, list[Unit]] = field(default_factory=dict)
    withheld: list[str] = field(default_factory=list)  # keys whose retrieved values conflict, unresolved

    def to_dict(self) -> dict[str, Any]:
        def units(d: Mapping[str, list[Unit]]) -> dict[str, list[list[str]]]:
            return {k: [[u.key, u.value] for u in v] for k, v in d.items()}
        return {"context": [[u.key, u.value] for u in self.context], "outcomes": self.outcomes,
                "shared": units(self.shared), "conflicting": units(self.conflicting),
                "memory_only": units(self.memory_only), "withheld": self.withheld}


def trim(query: Structured, retrieved: Sequence[Structured], index: EvidenceIndex | None = None,
         *, by_time: bool = False) -> Trimmed:
    """MemTrim's read-time rule (the MemTrim paper, eq. 1). The query's units are looked up in the
    trie, restricted to the retrieved memories: a memory's unit with the query's key and value is
    shared, with the query's key and another value conflicting; its other units are memory-only.
    Shared and conflicting units are dropped, memory-only ones kept; the stored outcome is kept when
    no supporting unit conflicts and the task is the query's, converted into a unit labelled by its
    task when the task differs, suppressed when a supporting unit conflicts. Then units are merged,
    each once; a key the query does not settle on which the retrieved memories disagree is withheld
    (or, with `by_time`, settled by the latest memory). Without an index one is built from `retrieved`."""
    if index is None:
        index = EvidenceIndex()
        for m in retrieved:
            index.add(m)
    ids = [m.ident for m in retrieved]
    q = {u.key: u.value for u in query.units}
    out = Trimmed([], {}, {i: [] for i in ids}, {i: [] for i in ids}, {})
    for key, value in sorted(q.items()):
        for v, holders in index.values(key, among=ids).items():
            for m in holders:
                (out.shared if v == value else out.conflicting)[m].append(Unit(key, v))
    kept: dict[str, list[tuple[str, Unit]]] = {}
    for m in retrieved:
        only = [u for u in sorted(m.units) if u.key not in q]
        out.memory_only[m.ident] = only
        extra: list[Unit] = []
        if m.outcome is None:
            out.outcomes[m.ident] = "none"
        elif any(index.supports(u, m.ident) or u in m.support for u in out.conflicting[m.ident]):
            out.outcomes[m.ident] = "suppress"
        elif m.task == query.task:
            out.outcomes[m.ident] = "keep"
            extra = [Unit("answer", normalise(m.outcome))]
        else:
            out.outcomes[m.ident] = "convert"
            extra = [Unit(m.task or "previous answer", normalise(m.outcome))]
        for u in only + extra:
            kept.setdefault(u.key, []).append((m.ident, u))
    order = {m.ident: i for i, m in enumerate(retrieved)}
    times = {m.ident: m.time or "" for m in retrieved}
    for key, items in kept.items():
        values = {u.value for _, u in items}
        if len(values) > 1:
            if not by_time:
                out.withheld.append(key)
                continue
            latest = max(items, key=lambda x: (times[x[0]], -order[x[0]]))[1]
            items = [(i, u) for i, u in items if u.value == latest.value]
        seen: set[Unit] = set()
        for _, u in items:
            if u not in seen:
                seen.add(u)
                out.context.append(u)
    return out


# ---------------------------------------------------------------- canonical values and grounding


def canonical_value(value: str, kind: str, when: str | None = None) -> str:
    """Boolean, numeric and temporal values in one form; others normalised text (articles dropped)."""
    from ..audit import conflicts

    v = normalise(value)
    if kind == "boolean":
        head = v.split()[0] if v else v
        return "true" if head in _TRUE else "false" if head in _FALSE else v
    if kind == "number":
        counted = conflicts.counts(v)
        if counted:
            return str(counted[0][0])
        m = re.search(r"-?\d+(?:\.\d+)?", v.replace(",", ""))
        return m.group(0) if m else v
    if kind == "time" and when:
        ds = conflicts.dates(value, when)
        if ds:
            d = ds[0]
            return d.start.isoformat() if d.start == d.end else f"{d.start.isoformat()}..{d.end.isoformat()}"
    return re.sub(r"^(?:the|a|an) ", "", v)


def grounded(value: str, span: str, source: str, kind: str = "text", when: str | None = None) -> bool:
    """The unit's span occurs in its source and its value is read there: every word of it in the
    source, or (numbers, times) the same canonical value as the span's."""
    src = normalise(source)
    if not normalise(span) or normalise(span) not in src:
        return False
    words = set(tokenize(value))
    if words and words <= set(tokenize(source)):
        return True
    if normalise(value) and normalise(value) in src:
        return True
    return kind in ("number", "time") and canonical_value(value, kind, when) == canonical_value(span, kind, when)


# ---------------------------------------------------------------- the parser

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string"},
        "answer": {"type": ["string", "null"]},
        "units": {"type": "array", "items": {"type": "object", "properties": {
            "entity": {"type": "string"}, "attribute": {"type": "string"}, "value": {"type": "string"},
            "type": {"enum": list(TYPES)}, "span": {"type": "string"}, "supports_answer": {"type": "boolean"}},
            "required": ["entity", "attribute", "value", "type", "span"]}},
    },
    "required": ["task", "units"],
}
MAX_TOKENS = 384


@dataclass
class ParseCounts:
    parsed: int = 0
    retried: int = 0
    failed: int = 0  # no valid reply after the retry: no units, outcome never reused
    ungrounded: int = 0  # units dropped because their span or value is not in the source
    merged_keys: int = 0  # new keys merged into an equivalent existing one
    merged_values: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _reply(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The parser's JSON reply, or why it is not valid."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None, "the reply holds no JSON object"
    try:
        doc = orjson.loads(text[start:end + 1])
    except orjson.JSONDecodeError as e:
        return None, f"the JSON does not parse ({e})"
    if not isinstance(doc, dict) or not isinstance(doc.get("units"), list):
        return None, "the JSON object has no units list"
    for i, u in enumerate(doc["units"]):
        if not isinstance(u, dict) or not all(isinstance(u.get(f), str) and u.get(f).strip()
                                              for f in ("entity", "attribute", "value", "span")):
            return None, f"unit {i} lacks one of entity, attribute, value, span"
    return doc, None


SameAs = Callable[[str, str], bool]  # (new, existing) -> equivalent?


class Parser:
    """The paper's fixed instruction parser, run with a model (deterministic decoding, the reply
    checked, retried once), canonicalising keys and values against the trie it fills."""

    def __init__(self, backend: Backend, same_as: SameAs | None = None, index: EvidenceIndex | None = None):
        self.backend = backend
        self.same_as = same_as if same_as is not None else self._same_as
        self.index = index if index is not None else EvidenceIndex()
        self.counts = ParseCounts()

    def _same_as(self, new: str, existing: str) -> bool:
        p = Prompt("", templates.render("memtrim_same", new=new, existing=existing))
        s = self.backend.score([p])[0]
        return s.ok and s.logodds is not None and s.logodds > 0

    def _ask(self, texts: Sequence[str], problems: Sequence[str | None] = ()) -> list[str]:
        prompts = []
        for i, t in enumerate(texts):
            task = templates.render("memtrim_parse", text=t)
            if problems and problems[i]:
                task += "\n\n" + templates.render("memtrim_retry", problems=problems[i])
            prompts.append(Prompt("", task, answer_prefix="{"))
        gens = in_parts("parsing evidence units", prompts, lambda ps: self.backend.generate(
            ps, max_new_tokens=MAX_TOKENS, json_schema=SCHEMA))
        return ["{" + g if not g.lstrip().startswith("{") else g for g in gens]

    def _problems(self, doc: dict[str, Any], text: str, when: str | None) -> str | None:
        bad = [f"unit {i} ({u['attribute']} = {u['value']!r}): its span or value is not in the text"
               for i, u in enumerate(doc["units"])
               if not grounded(u["value"], u["span"], text, u.get("type", "text"), when)]
        return "; ".join(bad) or None

    def parse(self, items: Sequence[tuple[str, str, str | None]], *, query: bool = False) -> list[Structured]:
        """Parse (id, text, time) items in order, canonicalise each against the trie, and add the
        memories to it (queries are parsed and canonicalised, never added)."""
        texts = [t for _, t, _ in items]
        replies = [_reply(g) for g in self._ask(texts)]
        problems = [why if doc is None else self._problems(doc, texts[i], items[i][2])
                    for i, (doc, why) in enumerate(replies)]
        again = [i for i, p in enumerate(problems) if p]
        if again:
            self.counts.retried += len(again)
            second = self._ask([texts[i] for i in again], [problems[i] for i in again])
            for i, g in zip(again, second, strict=True):
                doc, why = _reply(g)
                if doc is not None or replies[i][0] is None:
                    replies[i] = (doc, why)
        out = []
        for (ident, text, when), (doc, _) in zip(items, replies, strict=True):
            if doc is None:
                self.counts.failed += 1
                m = Structured(ident, frozenset(), None, None, frozenset(), when)
            else:
                self.counts.parsed += 1
                m = self._structured(ident, doc, text, when, query)
            if not query:
                self.index.add(m)
            out.append(m)
        return out

    def _key(self, entity: str, attribute: str, kind: str) -> str:
        key = f"{snake(entity)}.{snake(attribute)}"
        if key in self.index.types or key in self.index.nodes:
            return key
        ent = key.split(".")[0]
        same = [k for k in self.index.types if k.split(".")[0] == ent and self.index.types[k] == kind][:CANDIDATES]
        for k in same:
            if self.same_as(key.replace("_", " ").replace(".", " "), k.replace("_", " ").replace(".", " ")):
                self.counts.merged_keys += 1
                return k
        return key

    def _value(self, key: str, value: str, kind: str, when: str | None) -> str:
        v = canonical_value(value, kind, when)
        if kind not in ("text", "category"):
            return v
        existing = [x for x in self.index.nodes.get(key, {}) if x != v][:CANDIDATES]
        for x in existing:
            if self.same_as(f"{key}: {v}", f"{key}: {x}"):
                self.counts.merged_values += 1
                return x
        return v

    def _structured(self, ident: str, doc: dict[str, Any], text: str, when: str | None, query: bool) -> Structured:
        units, support = set(), set()
        for u in doc["units"]:
            kind = u.get("type") if u.get("type") in TYPES else "text"
            if not grounded(u["value"], u["span"], text, kind, when):
                self.counts.ungrounded += 1
                continue
            key = self._key(u["entity"], u["attribute"], kind)
            if not query:
                self.index.types.setdefault(key, kind)
            unit = Unit(key, self._value(key, u["value"], kind, when))
            units.add(unit)
            if u.get("supports_answer"):
                support.add(unit)
        answer = doc.get("answer")
        outcome = normalise(answer) if isinstance(answer, str) and normalise(answer) not in ("", "none", "null") \
            else None
        task = snake(doc.get("task") or "") or None
        if task in ("none", "null"):
            task = None
        return Structured(ident, frozenset(units), task, outcome, frozenset(support) or frozenset(units), when)
