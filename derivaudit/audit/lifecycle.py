"""The lifecycle audit: is a deletion, an invalidation or an update justified by the
history the store had seen when it acted?

A memory is a derivation; so is its removal or replacement. A deletion asserts that the memory no
longer holds, or that the user asked to forget it, and that assertion is checked like a write's,
with the same machinery (DerivAudit: obligations, two annotators, calibrated thresholds, null
evidence, checked subsets, blinded adjudication of disagreements), over the turns *after* the
target's write point up to the operation point ("the after view"):

- D: is the target's obligation determinate (the write audit's own question, so cached)? It is
  not when D says no over the after view, nor when the write audit labels the obligation
  ambiguous (DerivAudit: D no, or E and R both yes; this judge's D says yes to nearly anything,
  "Leo has something going on" included);
- U: do the after turns show it no longer holds (changed, ended, said to be wrong)? Asked as the
  write audit's own E question about the statement "It is no longer true that <obligation>" (each
  annotator's E wording): E is the question the judge answers best. A three-way "still holds / no
  longer holds / not said" choice, like R, separated nothing on real operations for
  Qwen2.5-Coder-1.5B (AUC 0.20 on the fixture's 12 operations against 0.89 for this form: its
  scores sat within 0.3 of each other whatever the later turns said);
- F: does someone ask to forget it? Asked, like U, as the write audit's own E question, about the
  statement "Someone asks to forget that <obligation>" (its own yes/no wording separated the
  calibration items less well), over the after turns that
  make a request to forget, delete or stop keeping something (`FORGET`: a speech act addressed to
  the store, "Forget that", "Can you delete …"; "I forget things" and "don't forget" make none) and
  refer to the target (a word of it in the request or the turn before, read with it: "Please
  forget that." says what only beside what it points at); with none, F is no, unasked.
  Over the whole after view the judge read "forget" into any turn about the fact.
- U by arithmetic: a later turn about the event that gives its date or count a new value (one the
  replacing memory states, or a change it announces) ends the old value (`later_values`).
An update's change is audited too: the old version's obligations are checked against the new
text with the write audit's own label ("kept": the new version supports it; E yes with R yes is
ambiguous there, not kept: the judge said E yes to "Priya works as a nurse" over "Priya works at a
hospital" and R yes too), and kept only when the new version states each of its content words
(`said_in`: a word it no longer says is a detail it dropped or changed, whatever E answers); what
it drops or changes must be superseded by the after turns. A successor is checked with U over the
turns it cites after the target's write (what it derives from must end the target; its own text
when it cites none of them), or by the after view's U when the checked subset that ends the target
names a turn the successor cites (the same question with the turns around it: "we moved to
Seattle" with "congratulations on the move"), and must itself be supported (the judge reads turns
better than a one-line memory).

An obligation with U yes is audited once more as a write (the write audit's own primitives and
label) over the superseding turns and every turn after them up to the operation point ("held"):
when the judge calls it supported there, the turns it read as ending the fact state it, or a later
one says it holds again ("my allergy is as bad as ever"); either way the latest word is not that
it ended, and U's yes does not supersede it.

Label rule (fixed; no typed label):
- delete / invalidate, no successor: justified when some determinate obligation has U (not held)
  or F yes; else ambiguous when some obligation is not determinate; else unjustified (collateral);
- with a successor: ambiguous when no determinate obligation has U yes over the successor's
  evidence, or over the after turns with a subset naming a turn the successor cites, and some
  obligation is not determinate; unjustified when none has (it is about something else) or the
  successor is unsupported or contradicted; justified when it conflicts and is supported;
  ambiguous otherwise (its own label unknown or ambiguous);
- update: justified when the new version keeps (supports, in its own words) every obligation of
  the old, or every one it drops has U or F yes, over the after view or over the turns the new
  version cites after the old one's write (the new version is the old one's successor, read as an
  invalidation's successor is); ambiguous when a dropped one is not determinate; else unjustified
  (the update lost a memory that still held).
An operation the store marks as made outside the conversation (origin api or ui) is labelled the
same way but reported apart: the conversation is not what it answered to.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rank_bm25 import BM25Okapi

from ..log.records import MAX_PASSAGES, MemoryLog, Turn, Write
from . import conflicts
from .annotate import Annotator, Item, Primitives, Settled, _answers, annotate, ask, passages_block, settle_agreed
from .decompose import Obligation, stems
from .evidence import tokenize

OUTSIDE = ("api", "ui")  # origins the store records as not from the conversation
# The version of the operation rules (which items are asked, and the label rule): part of the
# lifecycle stage's fingerprint, so a finished run is re-judged under new rules (answers cached).
RULES = ("successor-evidence-2, held-2, forget-turns-3, kept-label-1, after-keeps-successor-1, after-budget-1, "
         "written-ambiguous-1, update-evidence-1, forget-cal-3, forget-as-e-1, forget-negated-1, kept-words-1, "
         "forget-request-1", "later-values-1")
# A turn that asks to forget, delete or stop keeping something: the verbs of the request itself, in
# the form of a request (a speech act addressed to the store): the imperative at a clause's start
# ("Forget what I said", "Actually, delete that"), or after a request marker ("please", "can you",
# "I'd like you to", "go ahead and"). The same verbs in a statement make no request: "I forget a lot
# of things", "a good way to forget the stresses of life", "we need to remove the fence" (12 of
# LoCoMo's 5,882 turns use one of them, none as a request), nor after a negation: "Don't forget,
# you got this!" asks to remember (three of LoCoMo conv-49's turns say it).
_LEAD = (r"(?:(?:^|[.!?;:,(\"“”—–])\s*(?:(?:please|pls|ok|okay|actually|also|and|so|now|then|oh|hey|well|just|yeah|"
         r"yes|no|sorry|but|hmm|um)\b[,!]?\s+){0,3}"
         r"|\b(?:please|pls|can you|could you|would you|will you|you can|you could|you should|you may|you might|"
         r"(?:i|i['’]d|i would|we|we['’]d|we would)\s+(?:want|like|need|prefer)\s+(?:you|u)\s+to|"
         r"(?:want|need|asked|ask) you to|go ahead and|feel free to|(?:forget|remember|be sure|make sure) to)"
         r"\s+(?:please\s+|just\s+|also\s+)?)")
FORGET = re.compile(_LEAD + r"(?:(?:forget|delete|erase|remove|wipe|unsave)\b|(?:do not|don['’]?t|never|stop|no longer)"
                    r"\s+(?:keep(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|record(?:ing)?|track(?:ing)?|remember(?:ing)?)\b)"
                    r"|\brather you (?:not|didn['’]t)\s+(?:keep|store|save|record|track|remember)\b",
                    re.IGNORECASE | re.MULTILINE)
QUESTIONS = {"e": "op_f", "r": "op_u"}  # F sits in E's place, U in R's (both read as yes/no)
ADJUDICATE = {"e": "adjudicate_op_f", "r": "adjudicate_op_u"}
POLARITY = {"e": "asked to be forgotten", "r": "no longer true"}


@dataclass
class Case:
    """One operation to judge: a deletion or invalidation record, or an update (a write with a
    `parent_id` whose parent is in the log)."""

    case_id: str
    kind: str
    target: Write
    point: str  # the last turn the store had seen when it acted
    origin: str | None = None
    successor: Write | None = None
    new: Write | None = None  # an update's new version
    time: str | None = None
    citations: tuple[str, ...] = ()
    gold: str | None = None

    @property
    def conversation_id(self) -> str:
        return self.target.conversation_id


def cases(log: MemoryLog, conversations: Sequence[str] | None = None) -> list[Case]:
    """Every operation of the log, then every update, in input order."""
    by_id = {w.write_id: w for w in log.writes}
    out = []
    for op in log.operations:
        t = by_id[op.target]
        if conversations and t.conversation_id not in conversations:
            continue
        out.append(Case(op.operation_id, op.kind, t, op.last_seen_turn, op.origin,
                        by_id.get(op.successor) if op.successor else None, None, op.time, tuple(op.citations),
                        (op.meta or {}).get("gold")))
    for w in log.writes:
        p = by_id.get(w.parent_id) if w.parent_id else None
        if p is None or p.conversation_id != w.conversation_id:
            continue
        if conversations and w.conversation_id not in conversations:
            continue
        origin = (w.meta or {}).get("origin")
        out.append(Case(f"update:{w.write_id}", "update", p, w.last_seen_turn, origin, None, w, w.time,
                        tuple(w.citations), (w.meta or {}).get("lifecycle_gold")))
    return out


def _window(log: MemoryLog, case: Case, since: str | None = None) -> Sequence[Turn]:
    """Every turn after the target's write point (or after turn `since`) up to the operation point."""
    conv = log.conversations[case.conversation_id]
    return conv.turns[conv.position[since or case.target.last_seen_turn] + 1 : conv.position[case.point] + 1]


def after_turns(log: MemoryLog, case: Case, limit: int = MAX_PASSAGES, since: str | None = None,
                keep: Sequence[str] = ()) -> list[Turn]:
    """The turns after the target's write point (or after turn `since`) up to the operation point,
    in time order: all of them when they fit, else at most `limit` of them (a view's budget, seed
    004 §3.1), taken in this order: the turns in `keep`, the operation's citations, a successor's
    citations (what the successor derives from is the operation's evidence: the label reads the
    after view's checked subset for a turn it cites), then the turns BM25 ranks highest for the
    target text (those sharing a word with it). Within a group that does not fit, the latest turns
    (nearest the operation) go first."""
    window = _window(log, case, since)
    if len(window) <= limit:
        return list(window)
    query = tokenize(case.target.text)
    tokens = [tokenize(t.text) for t in window]
    scores = BM25Okapi([x or ["\0"] for x in tokens]).get_scores(query)
    words = set(query)
    groups = [set(keep), set(case.citations), set(case.successor.citations if case.successor else ())]
    order = [i for g in groups for i in reversed(range(len(window))) if window[i].turn_id in g]
    order += sorted((i for i, x in enumerate(tokens) if words & set(x)), key=lambda i: (-scores[i], i))
    chosen: set[int] = set()
    for i in order:
        if len(chosen) >= limit:
            break
        chosen.add(i)
    return [window[i] for i in sorted(chosen)]


def successor_turns(log: MemoryLog, case: Case) -> list[Turn]:
    """The evidence a successor replaces its target on: the turns it cites after the target's write
    point (up to the operation point): a successor supersedes its target when what it derives from
    ends the target (same subject, same slot). A successor that cites none of them is read from its
    own text."""
    assert case.successor is not None
    return _cited_after(log, case, case.successor) or [as_passage(case.successor)]


def new_version_turns(log: MemoryLog, case: Case) -> list[Turn]:
    """An update's new version is its target's successor: the turns it cites after the old version's
    write point, what the change derives from. None when it cites none of them (its text is read by
    the kept check; U over a one-line memory said no where the turns said yes)."""
    assert case.new is not None
    return _cited_after(log, case, case.new)


def _cited_after(log: MemoryLog, case: Case, w: Write) -> list[Turn]:
    """The turns `w` cites after the target's write point, up to the operation point."""
    cited = set(w.citations)
    return [t for t in _window(log, case) if t.turn_id in cited]


def forget_turns(log: MemoryLog, case: Case, limit: int = MAX_PASSAGES) -> list[Turn]:
    """The turns after the target's write point, up to the operation point, that make a request to
    forget, delete or stop keeping something (`FORGET`) and refer to the target: the request, or the
    turn just before it ("please forget that"), shares a word with the target's text. Only those can
    be the request F asks about; a request about something else is not a reason to remove this
    memory (the judge's F hardly tells which record a request names: it said yes to "Leo has
    something going on" over "Please delete the note about my morning runs"). The latest `limit`."""
    window = _window(log, case)
    conv = log.conversations[case.conversation_id]
    words = set(tokenize(case.target.text))
    out = []
    for t in window:
        if not FORGET.search(t.text):
            continue
        i = conv.position[t.turn_id]
        near = t.text + " " + (conv.turns[i - 1].text if i > 0 else "")
        if words & set(tokenize(near)):
            out.append(t)
    return out[-limit:]


def forget_evidence(log: MemoryLog, case: Case, limit: int = MAX_PASSAGES) -> list[Turn]:
    """What F reads: each request to forget (`forget_turns`) and, for a request that names nothing of
    the target itself ("Please forget that."), the turn just before it, which it refers to: without
    it the request does not say what is to be forgotten. In time order, the latest `limit`."""
    conv = log.conversations[case.conversation_id]
    words = set(tokenize(case.target.text))
    out: dict[int, Turn] = {}
    for t in forget_turns(log, case, limit):
        i = conv.position[t.turn_id]
        if i > 0 and not words & set(tokenize(t.text)):
            out[i - 1] = conv.turns[i - 1]
        out[i] = t
    return [out[i] for i in sorted(out)][-limit:]


def f_evidence(log: MemoryLog, case: Case) -> list[Turn]:
    """What F is asked over for a case: its `forget_evidence`, none for a case with a successor (a
    successor says why the target went; U checks it)."""
    return [] if case.successor is not None else forget_evidence(log, case)


def held_item(log: MemoryLog, case: Case, row: dict[str, Any], item: Item) -> Item | None:
    """For an obligation the after turns supersede (U yes on a checked subset): the write audit over
    the superseding turns and every turn after them, up to the operation point. The latest turns that
    speak to a fact decide whether it holds when the store acts (DerivAudit: a later statement is an
    update): a fact those turns state, or say holds again ("my allergy is as bad as ever"), is not
    superseded by them."""
    if not (row["u"] and row["u_subset"]):
        return None
    conv = log.conversations[case.conversation_id]
    position = conv.position
    first = min((item.passages[n - 1].turn_id for n in row["u_subset"] if 0 < n <= len(item.passages)),
                key=position.__getitem__, default=None)
    if first is None:
        return None
    since = conv.turns[position[first] - 1].turn_id  # `first` is after the write point: never turn 0
    return Item(item.obligation, case.target, "held", after_turns(log, case, since=since, keep=(first,)))


def later_values(log: MemoryLog, case: Case, rows: dict[str, list[dict[str, Any]]]) -> None:
    """U by arithmetic once the answers are settled, as the write audit's value check: U yes over the
    turns that give the event's date or count a new value (`conflicts.later_value`), where U said no
    (the judge does no calendar arithmetic, and misses a plain change of date)."""
    conv = log.conversations[case.conversation_id]
    by = case.new or case.successor
    by_p = conflicts.Passage(by.write_id, by.text, conflicts.write_time(log, by)) if by else None
    when = conflicts.write_time(log, case.target)
    for r in rows.get("after", []):
        if not r["u"]:
            turns = [conv.turns[conv.position[t]] for t in r["passages"]]
            found = conflicts.later_value(r["obligation"], when,
                                          [conflicts.Passage(t.turn_id, t.text, t.time) for t in turns], by_p)
            if found:
                r.update(u=True, u_subset=[r["passages"].index(t) + 1 for t in found.passages], held=False,
                         value=found.to_dict())


def as_passage(w: Write, order: int = 0) -> Turn:
    """A memory's text as a passage (a successor, an update's new version)."""
    return Turn(w.conversation_id, w.write_id, order, "memory", w.text, w.time)


@dataclass
class AfterItem(Item):
    """An obligation of the target over later passages: the evidence block says they came after."""

    BLOCK: ClassVar[str] = "op_passages"


def block(passages: Sequence[Turn | dict[str, Any]]) -> str:
    return passages_block(passages, AfterItem.BLOCK)


def describe(p: Primitives) -> str:
    """How the adjudicator sees one lifecycle assessment (no names, no roles)."""
    from .annotate import _yes_no as yn
    return f"determinate: {yn(p.d)}; asked to forget: {yn(p.e)}; no longer holds: {yn(p.r)}"


def _th(annotator: Annotator) -> dict[str, float]:
    """F and U thresholds in E's and R's places; the slot check is never asked here."""
    t = annotator.thresholds
    return {"d": t.get("d", 0.0), "e": t.get("f", 0.0), "r": t.get("u", 0.0), "s": math.inf}


_LOWER_FIRST = frozenset(("the", "a", "an", "his", "her", "their", "its", "our", "my", "your", "this", "that",
                          "these", "those", "there", "it", "they", "he", "she", "we"))


def clause(text: str) -> str:
    """An obligation as the clause after "It is no longer true that": no end punctuation, and a
    sentence-initial function word in lower case ("the garden ...", never "priya ...")."""
    text = " ".join(text.split()).rstrip(" .!?;:")
    first, _, rest = text.partition(" ")
    return (first.lower() if first.lower() in _LOWER_FIRST else first) + (" " + rest if rest else "")


def question(which: str, wording: str, statement: str):
    """An annotator's F or U question about `statement`: E's own question about "Someone asks to forget
    that ..." (F) or "It is no longer true that ..." (U)."""
    return ask(f"{QUESTIONS[which]}_{wording}", obligation=clause(statement))


def _asker(annotator: Annotator):
    v = annotator.wording
    return (annotator.backend,
            lambda k, it: ask(f"der_d_{v}", record=it.write.text, obligation=it.obligation.text),
            lambda k, it, which: question(which, v, it.obligation.text),
            _th(annotator))


def adjudication(which: str, obligation: str, first: str, second: str):
    """The adjudicator's F or U question (about the annotators' statements)."""
    return ask(ADJUDICATE[which], obligation=clause(obligation), first=first, second=second)


def _coin(item: Item) -> bool:
    seed = hashlib.sha256(f"{item.obligation.obligation_id}|{item.view}|{item.write.write_id}".encode()).digest()
    return random.Random(seed).random() < 0.5


@dataclass
class Judged(Settled):
    """F and U answers in E's and R's places (a write label read from them would mean nothing)."""

    def to_dict(self) -> dict[str, Any]:
        f = self.final
        return {"obligation_id": self.item.obligation.obligation_id, "obligation": self.item.obligation.text,
                "view": self.item.view, "passages": [t.turn_id for t in self.item.passages],
                "A": self.a.to_dict(), "B": self.b.to_dict(),
                "adjudicator": self.adjudicated.to_dict() if self.adjudicated else None,
                "d": f.d, "f": f.e, "u": f.r, "f_subset": f.e_subset, "u_subset": f.r_subset}


ASKED = {"after": frozenset("dr"), "successor": frozenset("dr"), "forget": frozenset("de")}  # D with U or F


def judge_after(items: Sequence[Item], a: Annotator, b: Annotator, adj: Annotator) -> list[Judged]:
    """D with U or F (its view's `ASKED`) from two annotators; disputes go to the adjudicator, blinded
    and in seeded order."""
    asked = [ASKED[it.view] for it in items]
    pa, pb = _answers(items, [_asker(a), _asker(b)], asked=asked, polarity=POLARITY)
    out = [Judged(items[k], pa[k], pb[k], None) for k in range(len(items))]
    disputed = [(k, frozenset(w for w in ("d", "e", "r") if getattr(pa[k], w) != getattr(pb[k], w)) & asked[k])
                for k in range(len(items))]
    disputed = [(k, s) for k, s in disputed if s]
    if not disputed:
        return out
    ks = [k for k, _ in disputed]
    shown = {k: (pa[k], pb[k]) if _coin(items[k]) else (pb[k], pa[k]) for k in ks}

    def fields(k: int, it: Item, part: Callable[[Primitives], str] = describe) -> dict[str, str]:
        return {"obligation": it.obligation.text, "first": part(shown[k][0]), "second": part(shown[k][1])}

    sub = [items[k] for k in ks]
    res = _answers(sub, [(
        adj.backend,
        lambda j, it: ask("adjudicate_d", record=it.write.text, **fields(ks[j], it, Primitives.describe_d)),
        lambda j, it, which: adjudication(which, **fields(ks[j], it)),
        _th(adj),
    )], asked=[s for _, s in disputed], polarity=POLARITY)[0]
    for (k, s), p in zip(disputed, res, strict=True):
        settle_agreed(p, pa[k], pb[k], asked=s)
        for which in ("d", "e", "r"):
            if which not in asked[k]:
                setattr(p, which, getattr(pa[k], which))
        out[k].adjudicated = p
    return out


def items_for(log: MemoryLog, case: Case, obligations: Sequence[Obligation],
              new_obligations_view: str = "new_version") -> dict[str, list[Item]]:
    """The items of one case: its target's obligations over the after turns (U: every case), over the
    successor's evidence (U: a case with one), over the after turns that ask to forget something (F: a
    case without a successor, when there are any) and over an update's new version (the write audit's
    E: kept?)."""
    after = after_turns(log, case)
    out: dict[str, list[Item]] = {"after": [AfterItem(o, case.target, "after", after) for o in obligations]}
    if case.successor is not None:
        out["successor"] = [AfterItem(o, case.target, "successor", successor_turns(log, case)) for o in obligations]
    if asks := f_evidence(log, case):
        out["forget"] = [AfterItem(o, case.target, "forget", asks) for o in obligations]
    if case.new is not None:
        out["kept"] = [Item(o, case.target, new_obligations_view, [as_passage(case.new)]) for o in obligations]
        if ev := new_version_turns(log, case):
            out["successor"] = [AfterItem(o, case.target, "successor", ev) for o in obligations]
    return out


def said_in(obligation: str, said: set[str]) -> bool:
    """Every content word of an old obligation is in the new version (by stem): else the new version
    dropped or changed what it says, which the history must supersede whatever the kept check's E
    answers (the judge said "Priya works at a hospital" keeps "Priya works as a nurse")."""
    return stems(obligation) <= said


Labelled = tuple[str, str, list[str]]


class _Reading:
    """A case's judged rows, read by the rule's terms: determinate, ended, superseded."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]]) -> None:
        self.rows = rows
        self.after = rows.get("after", [])
        self.asks = {r["obligation_id"]: r for r in rows.get("forget", []) if r["f"]}  # F over the request turns

    @staticmethod
    def determinate(r: dict[str, Any]) -> bool:
        """D yes over the after view, and the write audit did not label the obligation ambiguous
        (DerivAudit: D no, or E and R both yes, is *ambiguous*: what it asserts is not settled)."""
        return r["d"] is True and r.get("written") != "ambiguous"

    @staticmethod
    def ended(r: dict[str, Any]) -> bool:
        return bool(r["u"]) and not r.get("held")

    def superseded(self, r: dict[str, Any]) -> bool:
        return self.determinate(r) and (self.ended(r) or r["obligation_id"] in self.asks)

    @staticmethod
    def named(r: dict[str, Any], which: str) -> list[str]:
        """The turns of a row's checked subset for U or F."""
        return [r["passages"][n - 1] for n in r[f"{which}_subset"] if 0 < n <= len(r["passages"])]

    @staticmethod
    def vague(rs: Sequence[dict[str, Any]], what: str = "the target") -> str:
        """Why `what` is not determinate."""
        w = next((r for r in rs if r.get("written") == "ambiguous"), None)
        return f"{what} is not determinate" + (
            f" (the write audit labels {w['obligation']!r} ambiguous)" if w is not None else "")

    def deciding(self, rs: Sequence[dict[str, Any]]) -> list[str]:
        out: list[str] = []
        for r in rs:
            if self.ended(r):
                out += self.named(r, "u")
            if (f := self.asks.get(r["obligation_id"])) is not None:
                out += self.named(f, "f")
        return sorted(set(out), key=out.index)


def _label_update(case: Case, rd: _Reading) -> Labelled:
    """An update is justified when every obligation it drops or changes is superseded."""
    assert case.new is not None
    said = stems(case.new.text)
    kept = {r["obligation_id"]: r.get("label") == "supported" and said_in(r["obligation"], said)
            for r in rd.rows.get("kept", [])}
    dropped = [r for r in rd.after if not kept.get(r["obligation_id"], False)]
    # the new version's own evidence ends it (an update's successor, read like an invalidation's)
    replaced = {r["obligation_id"]: r for r in rd.rows.get("successor", []) if rd.determinate(r) and r["u"]}

    def gone(r: dict[str, Any]) -> bool:
        return rd.superseded(r) or r["obligation_id"] in replaced

    if not dropped:
        return "justified", "the new version keeps every obligation of the old", []
    if all(gone(r) for r in dropped):
        turns = rd.deciding(dropped) + [t for r in dropped if r["obligation_id"] in replaced
                                        for t in rd.named(replaced[r["obligation_id"]], "u")]
        return ("justified", "every obligation it drops or changes is superseded by a later turn",
                sorted(set(turns), key=turns.index))
    if any(not rd.determinate(r) for r in dropped if not gone(r)):
        return "ambiguous", rd.vague(dropped, "an obligation it drops"), []
    lost = next(r for r in dropped if not gone(r))
    return "unjustified", f"it drops {lost['obligation']!r}, which no later turn supersedes", []


def _label_replaced(case: Case, rd: _Reading, successor_label: str | None) -> Labelled:
    """An invalidation by a successor is justified when the successor replaces the target and is
    itself supported."""
    assert case.successor is not None
    cited = set(case.successor.citations)
    conflict = [r for r in rd.rows.get("successor", []) if rd.determinate(r) and r["u"]] + [
        r for r in rd.after if rd.determinate(r) and rd.ended(r) and cited & set(rd.named(r, "u"))]
    if not conflict:
        if any(not rd.determinate(r) for r in rd.after):
            return "ambiguous", rd.vague(rd.after), []
        return ("unjustified", "the successor does not replace any obligation of the target "
                "(another subject or slot)", [])
    if successor_label == "supported":
        return "justified", "the successor replaces the target and is supported", []
    if successor_label in ("unsupported", "contradicted"):
        return "unjustified", f"the successor replaces the target but is {successor_label}", []
    return "ambiguous", f"the successor's own label is {successor_label or 'unknown'}", []


def _label_ended(rd: _Reading) -> Labelled:
    """A deletion or an invalidation without a successor is justified by a later turn that
    supersedes the target or asks to forget it."""
    hit = [r for r in rd.after if rd.superseded(r)]
    if hit:
        what = "a later turn that supersedes it" if any(rd.ended(r) for r in hit) else "a request to forget it"
        return "justified", f"{what}", rd.deciding(hit)
    if not rd.after or any(not rd.determinate(r) for r in rd.after):
        return "ambiguous", rd.vague(rd.after), []
    again = [r for r in rd.after if r["u"] and r.get("held")]
    if again:
        return ("unjustified", "a later turn seemed to supersede it, but read as a write those turns and the "
                f"ones after them say it holds ({', '.join(again[0].get('held_turns', []))})", [])
    return "unjustified", "no later turn supersedes or refutes it, and nobody asked to forget it", []


def label(case: Case, rows: dict[str, list[dict[str, Any]]], successor_label: str | None = None) -> Labelled:
    """The fixed rule above: (label, why, the deciding turn ids)."""
    rd = _Reading(rows)
    if case.kind == "update":
        return _label_update(case, rd)
    if case.successor is not None:
        return _label_replaced(case, rd, successor_label)
    return _label_ended(rd)


@dataclass
class Result:
    case: Case
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    label: str = "ambiguous"
    why: str = ""
    deciding: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {"case_id": c.case_id, "kind": c.kind, "conversation_id": c.conversation_id,
                "target": c.target.write_id, "target_text": c.target.text, "point": c.point, "time": c.time,
                "origin": c.origin, "outside_conversation": c.origin in OUTSIDE,
                "successor": c.successor.write_id if c.successor else None,
                "new": c.new.write_id if c.new else None, "new_text": c.new.text if c.new else None,
                "label": self.label, "why": self.why, "deciding_turns": self.deciding, "gold": c.gold,
                "rows": self.rows}


def judge(log: MemoryLog, todo: Sequence[Case], obligations: dict[str, Sequence[Obligation]],
          a: Annotator, b: Annotator, adj: Annotator, write_labels: dict[str, str] | None = None,
          obligation_labels: dict[str, str] | None = None) -> list[Result]:
    """Judge the cases: one round of after/successor items and one of kept items (the write audit's
    own primitives) for all of them together. `write_labels`: the write audit's label of each write
    (a successor's); `obligation_labels`: of each obligation (a target's, kept in its rows as
    "written": an obligation the write audit calls ambiguous is not determinate)."""
    write_labels = write_labels or {}
    obligation_labels = obligation_labels or {}
    per = [items_for(log, c, obligations[c.target.write_id]) for c in todo]
    after = [(ci, part, it) for ci, d in enumerate(per) for part in ASKED for it in d.get(part, [])]
    judged = judge_after([it for _, _, it in after], a, b, adj)
    results = [Result(c) for c in todo]
    held = []
    for (ci, part, it), j in zip(after, judged, strict=True):
        row = j.to_dict()
        row["written"] = obligation_labels.get(row["obligation_id"])
        results[ci].rows.setdefault(part, []).append(row)
        if part == "after" and (h := held_item(log, todo[ci], row, it)) is not None:
            held.append((row, h))
    kept = [(ci, it) for ci, d in enumerate(per) for it in d.get("kept", [])]
    anns = annotate([it for _, it in kept] + [it for _, it in held], a, b, adj) if kept or held else []
    for (ci, it), x in zip(kept, anns[: len(kept)], strict=True):
        f = x.final
        new = conflicts.Passage(todo[ci].new.write_id, todo[ci].new.text, conflicts.write_time(log, todo[ci].new))
        moved = conflicts.conflict(it.obligation.text, conflicts.write_time(log, todo[ci].target), [new])
        results[ci].rows.setdefault("kept", []).append(
            {"obligation_id": it.obligation.obligation_id, "obligation": it.obligation.text, "e": f.e,
             "label": "contradicted" if moved else x.label})  # the write audit's value check, as in a scan
    for (row, it), x in zip(held, anns[len(kept):], strict=True):
        row["held"] = x.label == "supported"
        row["held_turns"] = [t.turn_id for t in it.passages]
    for c, r in zip(todo, results, strict=True):
        later_values(log, c, r.rows)
    for r in results:
        succ = write_labels.get(r.case.successor.write_id) if r.case.successor else None
        r.label, r.why, r.deciding = label(r.case, r.rows, succ)
    return results
