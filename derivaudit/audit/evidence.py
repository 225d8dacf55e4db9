"""The two evidence views of a memory write (DerivAudit, §3.1 and App. D).

Citation-only: the cited turns. Expanded-history: the cited turns plus up to 12 turns that BM25
ranks highest for the memory text, searched only in the history before the write point, 16 at
most in all. Both are in time order and carry no mark of which turn was cited and which was
retrieved; that record is kept apart in `EvidenceViews.retrieved` for reports.

Each conversation is indexed once (rank-bm25's BM25Okapi over all its turns) and every write
scores only the turns up to its write point, so building views is linear in history per write,
not quadratic. Consequence: BM25's IDF statistics are those of the whole conversation; only the
candidate passages are restricted to the pre-write history.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rank_bm25 import BM25Okapi

from ..log import timeref
from ..log.records import MAX_PASSAGES, MAX_RETRIEVED, Conversation, MemoryLog, Turn, Write

if TYPE_CHECKING:
    from ..log.spill import SpilledLog

# Standard English stop words (the NLTK list, lower-cased, apostrophes removed).
STOP_WORDS = frozenset("""
a about above after again against ain all am an and any are aren arent as at be because been before
being below between both but by can couldn couldnt d did didn didnt do does doesn doesnt doing don dont
down during each few for from further had hadn hadnt has hasn hasnt have haven havent having he her
here hers herself him himself his how i if in into is isn isnt it its itself just ll m ma me mightn
mightnt more most mustn mustnt my myself needn neednt no nor not now o of off on once only or other
our ours ourselves out over own re s same shan shant she shes should shouldn shouldnt shouldve so
some such t than that thatll the their theirs them themselves then there these they this those
through to too under until up ve very was wasn wasnt we were weren werent what when where which
while who whom why will with won wont wouldn wouldnt y you youd youll your youre yours yourself
yourselves youve
""".split())  # noqa: SIM905 (a word list reads better as text)
_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """BM25 tokens: lower-cased runs of letters/digits (punctuation splits, apostrophes dropped),
    minus English stop words."""
    text = text.lower().replace("'", "").replace("\u2019", "")
    return [w for w in _WORD.findall(text) if w not in STOP_WORDS]


@dataclass(frozen=True, slots=True)
class EvidenceSettings:
    """How the expanded view is built. `limit_floor`: a left-out pre-write passage counts as
    'as relevant as what was kept' when its BM25 score is at least this share of the top score."""

    max_retrieved: int = MAX_RETRIEVED
    max_passages: int = MAX_PASSAGES
    limit_floor: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        return {"max_retrieved": self.max_retrieved, "max_passages": self.max_passages,
                "limit_floor": self.limit_floor, "tokenizer": "lower+\\w+-stopwords", "ranker": "BM25Okapi",
                "statistics": "pre-write"}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvidenceSettings:
        return cls(**{k: d[k] for k in ("max_retrieved", "max_passages", "limit_floor") if k in d})


@dataclass(frozen=True, slots=True)
class EvidenceViews:
    write: Write
    citation_only: tuple[Turn, ...]
    expanded: tuple[Turn, ...]
    retrieved: tuple[str, ...] = ()
    bm25: dict[str, float] = field(default_factory=dict)
    candidates: int = 0
    search_limited: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "write_id": self.write.write_id,
            "conversation_id": self.write.conversation_id,
            "text": self.write.text,
            "citation_only": [passage_dict(t) for t in self.citation_only],
            "expanded": [passage_dict(t) for t in self.expanded],
            "search_limited": self.search_limited,
            "provenance": {
                "cited": list(self.write.citations),
                "retrieved": list(self.retrieved),
                "bm25": self.bm25,
                "candidates": self.candidates,
            },
        }


def passage_dict(t: Turn) -> dict[str, Any]:
    """A passage as views.jsonl records it; `time_refs`: the relative time expressions resolved
    against the turn's time (timeref), as the evidence block shows them."""
    d = {"turn_id": t.turn_id, "order": t.order, "speaker": t.speaker, "text": t.text,
         "time": t.time, "session": t.session}
    refs = timeref.resolve(" ".join(t.text.split()), t.time)
    if refs:
        d["time_refs"] = [r.as_dict() for r in refs]
    return d


class ConversationIndex:
    """BM25 over one conversation's turns, its statistics (IDF, average length) those of the history
    before each write point: what the writer saw, so a turn said after the memory never changes
    which earlier turns are found (DerivAudit: the views are pre-write, all the way down).

    Each turn is tokenized and counted once; the statistics are built per distinct write point,
    advancing one running document-frequency count through the turns (writes come in order), so a
    conversation costs its length plus its vocabulary per distinct point, not its length per write.
    Scoring is rank_bm25's own (BM25Okapi, its idf floor included), over the prefix statistics."""

    def __init__(self, conv: Conversation):
        self.conv = conv
        self._docs = [tokenize(t.text) for t in conv.turns]
        self._bm25 = BM25Okapi(self._docs) if any(self._docs) else None  # doc_freqs and lengths of every turn
        self._at: dict[int, BM25Okapi | None] = {}  # write point -> BM25 with that prefix's statistics
        self._nd: dict[str, int] = {}  # documents per word, over turns 0 .. self._upto
        self._upto = -1
        self._length = 0

    def _advance(self, point: int) -> None:
        """The running counts over turns 0 .. point (from scratch if asked for an earlier point)."""
        assert self._bm25 is not None
        if point < self._upto:
            self._nd, self._upto, self._length = {}, -1, 0
        for i in range(self._upto + 1, point + 1):
            for word in self._bm25.doc_freqs[i]:
                self._nd[word] = self._nd.get(word, 0) + 1
            self._length += self._bm25.doc_len[i]
        self._upto = point

    def _bm25_at(self, point: int) -> BM25Okapi | None:
        """BM25Okapi over the turns up to the write point (None when they hold no word)."""
        if point not in self._at:
            self._advance(point)
            if not self._nd:
                self._at[point] = None
            else:
                full = self._bm25
                bm = BM25Okapi.__new__(BM25Okapi)  # the library's scorer, with the prefix's statistics
                bm.k1, bm.b, bm.epsilon = full.k1, full.b, full.epsilon
                bm.corpus_size, bm.avgdl = point + 1, self._length / (point + 1)
                bm.doc_freqs, bm.doc_len, bm.idf = full.doc_freqs, full.doc_len, {}
                bm._calc_idf(dict(self._nd))
                self._at[point] = bm
        return self._at[point]

    def views(self, write: Write, settings: EvidenceSettings = EvidenceSettings()) -> EvidenceViews:
        conv = self.conv
        point = conv.position[write.last_seen_turn]
        cited_pos = sorted({conv.position[c] for c in write.citations})
        cited = tuple(conv.turns[i] for i in cited_pos)
        budget = max(0, min(settings.max_retrieved, settings.max_passages - len(cited)))
        query = tokenize(write.text)
        if self._bm25 is None or not query or budget == 0:
            return EvidenceViews(write, cited, cited)
        qset = set(query)
        cited_set = set(cited_pos)
        # Candidates: pre-write turns, not cited, sharing at least one query term.
        cand = [i for i in range(point + 1)
                if i not in cited_set and not qset.isdisjoint(self._bm25.doc_freqs[i])]
        bm25 = self._bm25_at(point) if cand else None
        if bm25 is None:
            return EvidenceViews(write, cited, cited)
        scores = bm25.get_batch_scores(query, cand)
        ranked = sorted(zip(cand, scores, strict=True), key=lambda x: (-x[1], x[0]))
        chosen, rest = ranked[:budget], ranked[budget:]
        top = ranked[0][1]
        floor = settings.limit_floor * top
        limited = bool(rest) and top > 0 and rest[0][1] > 0 and rest[0][1] >= floor
        expanded_pos = sorted(cited_set | {i for i, _ in chosen})
        return EvidenceViews(
            write=write,
            citation_only=cited,
            expanded=tuple(conv.turns[i] for i in expanded_pos),
            retrieved=tuple(conv.turns[i].turn_id for i, _ in sorted(chosen)),
            bm25={conv.turns[i].turn_id: round(float(s), 4) for i, s in chosen},
            candidates=len(cand),
            search_limited=limited,
        )


def build_views(log: MemoryLog | SpilledLog, settings: EvidenceSettings = EvidenceSettings(),
                write_ids: set[str] | None = None) -> Iterator[EvidenceViews]:
    """EvidenceViews of every write (or of `write_ids`), in input order; each conversation indexed once.
    For a loaded log, an index is dropped after its conversation's last write, so memory holds the
    indexes of the conversations still in progress; a `spill.SpilledLog` (the `views` command) is
    read one conversation at a time, so memory holds one conversation whatever the log's size."""
    if not isinstance(log, MemoryLog):
        return log.each(lambda conv: functools.partial(_view, ConversationIndex(conv), settings), write_ids)
    return _build_views(log, settings, write_ids)


def _view(index: ConversationIndex, settings: EvidenceSettings, write: Write) -> EvidenceViews:
    return index.views(write, settings)


def _build_views(log: MemoryLog, settings: EvidenceSettings, write_ids: set[str] | None) -> Iterator[EvidenceViews]:
    todo = [w for w in log.writes if write_ids is None or w.write_id in write_ids]
    last = {w.conversation_id: i for i, w in enumerate(todo)}
    indexes: dict[str, ConversationIndex] = {}
    for i, w in enumerate(todo):
        idx = indexes.get(w.conversation_id)
        if idx is None:
            idx = indexes[w.conversation_id] = ConversationIndex(log.conversations[w.conversation_id])
        yield idx.views(w, settings)
        if last[w.conversation_id] == i:
            del indexes[w.conversation_id]


@dataclass
class LimitedTally:
    """The search-limited share of a stream of views (counted as they are built, so a log of any
    size is never held whole): what `views` reports after the last one."""

    total: int
    limited: int = 0

    def add(self, v: EvidenceViews) -> EvidenceViews:
        self.limited += v.search_limited
        return v

    @property
    def share(self) -> float:
        return self.limited / self.total if self.total else 0.0

    def describe(self, floor: float) -> str:
        return f"{self.total} writes; search-limited: {self.limited} ({self.share:.1%}) at floor {floor}"


def __getattr__(name: str) -> Any:
    if name == "Views":  # the name before 0.3: one letter from views.View, a verification view
        import warnings

        warnings.warn("derivaudit.audit.evidence.Views is now EvidenceViews", DeprecationWarning, stacklevel=2)
        return EvidenceViews
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
