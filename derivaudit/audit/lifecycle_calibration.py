"""The lifecycle audit's calibration: F (asked to be forgotten) and U (no longer true) thresholds of
each annotator, read on items of known answer built from the calibration turns, as the write
audit's E and R thresholds are (calibrate.py)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..log.records import MemoryLog, Turn
from ..models.base import Backend, Prompt
from . import calibrate as cal
from .annotate import Annotator, Primitives
from .lifecycle import Case, adjudication, block, describe, f_evidence, question


def changed(t: Turn) -> Turn:
    said = " ".join(t.text.split())
    return Turn(t.conversation_id, t.turn_id + "~u", t.order, t.speaker,
                f'What I told you before ("{said}") is not true any more: that has changed.', t.time)


def forget(t: Turn) -> Turn:
    return Turn(t.conversation_id, t.turn_id + "~f", t.order, t.speaker,
                f'Please forget that I said "{" ".join(t.text.split())}". Delete it from your memory.', t.time)


def forget_that(t: Turn) -> Turn:
    """A request that names nothing of what it asks to forget: read with the turn before it
    (`forget_evidence`)."""
    return Turn(t.conversation_id, t.turn_id + "~g", t.order, t.speaker,
                "Please forget that. I don't want it kept in your memory.", t.time)


@dataclass(frozen=True)
class CalItem:
    which: str  # "e" (F) | "r" (U)
    statement: str
    passages: tuple[Turn, ...]
    positive: bool


def asks_forget(log: MemoryLog, cases: Sequence[Case]) -> bool:
    """Whether F is asked on any of `cases` (`f_evidence`). Where none is, F's calibration items are
    not scored: most stores' histories hold no request to forget (LoCoMo conv-49's 29 cases meet
    none), and those items were 4 of 7."""
    return any(f_evidence(log, c) for c in cases)


def build_items(log: MemoryLog, n: int = 12, window: int = 6, seed: int = 0,
                asked: Sequence[str] = ("e", "r")) -> list[CalItem]:
    """Per statement p (a turn's own words): over the `window` turns after it with one turn put in the
    middle, U positive (a turn saying p changed), U negatives (p restated: still holds; a statement of
    the same conversation two windows away, `calibrate.distant_turns`: not said); in the two forms F
    meets (`forget_evidence`), F positives (a request to forget p; p, then "Please forget that.") and
    F negatives (a request to forget that other statement, and the other statement followed by
    "Please forget that."). A request not to forget p is not one: `FORGET` does not match it, so F
    never meets it. `asked`: the questions to build items for ("e": F, "r": U); the statements drawn
    are the same whichever are asked."""
    rng = random.Random(seed)
    convs = sorted(log.conversations)
    pool = [(c, i) for c in convs for i, t in enumerate(log.conversations[c].turns[:-1])
            if len(t.text.split()) >= cal.MIN_WORDS]
    rng.shuffle(pool)
    out: list[CalItem] = []
    for conv, i in pool[:n]:
        turns = log.conversations[conv].turns
        p, later = turns[i], list(turns[i + 1 : i + 1 + window])
        mid = len(later) // 2
        others = cal.distant_turns(log, conv, i, window)

        def with_(x: Turn, later: list[Turn] = later, mid: int = mid) -> tuple[Turn, ...]:
            return tuple(later[:mid] + [x] + later[mid:])

        s = cal.said(p)
        q = rng.choice(others) if others else later[-1]
        out += [CalItem("r", s, with_(changed(p)), True), CalItem("r", s, with_(p), False),
                CalItem("e", s, (forget(p),), True), CalItem("e", s, (forget(q),), False),
                CalItem("e", s, (p, forget_that(p)), True), CalItem("e", s, (q, forget_that(q)), False)]
        if others:
            out.append(CalItem("r", cal.said(q), tuple(later), False))
    return [it for it in out if it.which in asked]


def calibrate(annotators: Sequence[tuple[Annotator, bool]], log: MemoryLog, n: int = 12,
              target: float = cal.TARGET_FPR, asked: Sequence[str] = ("e", "r")) -> list[dict[str, Any]]:
    """Each annotator's F and U thresholds at FPR <= target (one scoring call for all, so roles on
    one model share prefixes); only those of `asked` ("e": F, "r": U). `annotators`: (annotator,
    as_adjudicator)."""
    from .annotate import score_all

    items = build_items(log, n=n, asked=asked)
    reqs: list[tuple[Backend, Prompt]] = []
    for x, as_adj in annotators:
        for it in items:
            if as_adj:
                yes = describe(Primitives(True, it.which == "e", it.which == "r"))
                no = describe(Primitives(True, False, False))
                coin = random.Random(hashlib.sha256(it.statement.encode()).digest()).random() < 0.5
                first, second = (yes, no) if coin else (no, yes)
                q = adjudication(it.which, it.statement, first, second)
            else:
                q = question(it.which, x.wording, it.statement)
            reqs.append((x.backend, Prompt(block(it.passages), q[0], verdict=q[1])))
    scores = score_all(reqs)
    out = []
    for k in range(len(annotators)):
        vals = [s.logodds for s in scores[k * len(items):(k + 1) * len(items)]]
        th = {}
        for which, name in (("e", "f"), ("r", "u")):
            if which not in asked:
                continue
            pairs = [(v, it.positive) for v, it in zip(vals, items, strict=True) if it.which == which and v is not None]
            th[name] = cal.pick([v for v, pos in pairs if pos], [v for v, pos in pairs if not pos], target)
        out.append({"thresholds": th, "items": len(items), "scoring_errors": sum(v is None for v in vals),
                    "target_fpr": target})
    return out
