"""D/E/R primitives from two annotators and blinded adjudication, per obligation and evidence view
(DerivAudit, §3.2 and App. B); the obligations come from `decompose`, the label rule from `labels`.

Annotators never type a label. Per obligation and evidence view each answers, in this order:
D (determinate? from the record alone, no evidence shown), E (does some subset of the passages imply
it? if yes, the smallest subset) and R (does some subset imply it is false, same subject, event and
time? if yes, the subset). Yes/no answers are read by log-odds (admit "yes" when log p(yes) > log
p(no)); subsets are generated and must name passages that exist in that view. Only obligations whose
D/E/R answers differ between the two annotators go to the adjudicator, which sees both primitive
sets in a seeded random order with no names or provenance and writes primitives itself.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from rank_bm25 import BM25Okapi

from .. import templates
from ..admission.views import passage_line
from ..log.records import Turn, Write
from ..models.base import Backend, Prompt, Score, Verdict
from ..rates.stats import clears
from . import slots
from .decompose import Obligation
from .evidence import tokenize
from .labels import MEMORY_PRECEDENCE, OBLIGATION_LABELS, memory_label, obligation_label  # noqa: F401

# E asks yes/no "do the passages show it is true?". R is a three-way choice (true / false / not said)
# read as log p(false) - log p(true or not said): asked yes/no "...is false?", small models answer
# whether the passages are relevant (SPEC, prototype), not whether they refute.
# S, the slot check: does the obligation's own passage give a *different* time, place, quantity or
# person for the same event (slots.py)? A yes feeds R (see _slot_checks).
QUESTIONS = {"e": "der_e", "r": "der_r3", "s": "der_s"}
ADJUDICATE = {"e": "adjudicate_e", "r": "adjudicate_r3", "s": "adjudicate_s"}
POLARITY = {"e": "true", "r": "false"}  # "Which passages above show that the statement is ...?"
# The version of how a yes's implying subset is had: part of the primitives stage's fingerprint.
SUBSET_RULES = "one-passage-view-1"


# ---------------------------------------------------------------- primitives


def _yes_no(x: bool | None) -> str:
    return "unclear" if x is None else ("yes" if x else "no")


@dataclass
class Primitives:
    d: bool | None
    e: bool | None
    r: bool | None
    e_subset: list[int] = field(default_factory=list)  # 1-based passage numbers of the view
    r_subset: list[int] = field(default_factory=list)
    scores: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    s: bool | None = None  # the slot check; None where it was not asked (no slot, no passages, R yes)
    s_subset: list[int] = field(default_factory=list)  # the passages it was asked over

    @property
    def answers(self) -> tuple[bool | None, bool | None, bool | None]:
        return (self.d, self.e, self.r)

    def describe(self) -> str:
        """How the adjudicator sees an assessment: answers and subsets, nothing about who gave it."""
        yn = _yes_no
        e = yn(self.e) + (f" (passages {', '.join(map(str, self.e_subset))})" if self.e and self.e_subset else "")
        r = yn(self.r) + (f" (passages {', '.join(map(str, self.r_subset))})" if self.r and self.r_subset else "")
        return f"determinate: {yn(self.d)}; implied true: {e}; implied false: {r}"

    def describe_s(self, slot: str) -> str:
        """The slot-check part alone, as the adjudicator sees it."""
        return f"different {slot}: {_yes_no(self.s)}"

    def describe_d(self) -> str:
        """The D part alone: the adjudicator's D question is asked from the record alone."""
        return f"determinate: {_yes_no(self.d)}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


BOUNDED = "bounded score"  # a note's words: one of yes/no was outside the top k, its log-probability bounded


def _yes(s: Score, notes: list[str], what: str) -> bool | None:
    if not s.ok:
        notes.append(f"{what}: scoring error: {s.error}")
        return None
    return s.logodds > 0  # type: ignore[operator]


_NUM = re.compile(r"\d+")


def parse_subset(text: str, n_passages: int) -> list[int]:
    """Passage numbers named in a generated answer; every one must exist in the view. "none" (no
    passage implies it) gives []."""
    first = text.split("\n\n")[0]
    nums = [int(x) for x in _NUM.findall(first)]
    if not nums:
        if re.search(r"\bnone\b|\bno passage", first, re.I):
            return []
        raise ValueError("names no passage number")
    bad = [x for x in nums if not 1 <= x <= n_passages]
    if bad:
        raise ValueError(f"passage number(s) {bad} do not exist (1..{n_passages})")
    return sorted(set(nums))


@dataclass
class Item:
    """One obligation in one evidence view."""

    obligation: Obligation
    write: Write
    view: str  # citation_only | expanded
    passages: Sequence[Turn]
    BLOCK: ClassVar[str] = "der_passages"  # the evidence block's prompt file

    @property
    def shared(self) -> str:
        """The evidence block of the E/R questions: the passages alone (no record, no preamble)."""
        return passages_block(self.passages, self.BLOCK)

    @property
    def null_shared(self) -> str:
        """The same number of content-free passages: the null evidence a yes must beat."""
        return passages_block(null_passages(len(self.passages)), self.BLOCK)

    def subset_shared(self, nums: Sequence[int]) -> str:
        """Only the named passages (renumbered), for rescoring a yes on its implying subset."""
        return passages_block([self.passages[n - 1] for n in nums], self.BLOCK)

    @functools.cached_property
    def slot(self) -> slots.Slot | None:
        """The time, place, quantity or person the obligation asserts (None: no slot check)."""
        names = {p.speaker for p in self.passages if p.speaker}
        return slots.find(self.obligation.text, self.obligation.subtype, names)


def passages_block(passages: Sequence[Turn | dict[str, Any]], template: str = "der_passages") -> str:
    lines = "\n".join(passage_line(i, p) for i, p in enumerate(passages, start=1)) or "(no passages)"
    return templates.render(template, passages=lines)


def null_passages(n: int) -> list[dict[str, Any]]:
    """`n` content-free passages (derivaudit/prompts/null_passages.txt, cycled)."""
    lines = [x for x in templates.load("null_passages").splitlines() if x.strip()]
    out = []
    for i in range(n):
        speaker, _, text = lines[i % len(lines)].partition(": ")
        out.append({"speaker": speaker, "text": text})
    return out


@dataclass
class Annotator:
    role: str  # A | B | adjudicator
    backend: Backend
    wording: str = "a"  # der_{d,e,r}_{wording}.txt; run files keep the key "variant"
    thresholds: dict[str, float] = field(default_factory=dict)  # "e", "r": calibrated (default 0 = argmax)

    def describe(self) -> dict[str, Any]:
        return {"role": self.role, "variant": self.wording, "model": self.backend.identity(),
                "thresholds": dict(self.thresholds)}


def _per_backend(requests: Sequence[tuple[Backend, Prompt]], call: Callable[[Backend, list[Prompt]], list[Any]]):
    """One call per backend, so that prompts sharing an evidence block share its prefix."""
    out: list[Any] = [None] * len(requests)
    groups: dict[int, tuple[Backend, list[int]]] = {}
    for i, (be, _) in enumerate(requests):
        groups.setdefault(id(be), (be, []))[1].append(i)
    for be, ix in groups.values():
        for i, r in zip(ix, call(be, [requests[i][1] for i in ix]), strict=True):
            out[i] = r
    return out


def score_all(requests: Sequence[tuple[Backend, Prompt]]) -> list[Score]:
    return _per_backend(requests, lambda be, ps: be.score(ps))


def generate_all(requests: Sequence[tuple[Backend, Prompt]], max_new_tokens: int,
                 stop: Sequence[str] = ()) -> list[str]:
    return _per_backend(requests, lambda be, ps: be.generate(ps, max_new_tokens=max_new_tokens, stop=stop))


@dataclass
class _Job:
    """One annotator's primitives for one item, and how to ask its E/R question."""

    item: Item
    prim: Primitives
    backend: Backend
    task: Callable[[str], Task]  # which ("e" | "r") -> the question after the evidence block
    thresholds: dict[str, float]
    polarity: dict[str, str] = field(default_factory=lambda: dict(POLARITY))  # der_subset's wording per primitive


def _clears(logodds: float, th: float) -> bool:
    """At or above the threshold; at the argmax default (0) a tie is not a yes."""
    return clears(logodds, th)


def _decide(job: _Job, which: str, s: Score, null: Score | None) -> bool | None:
    """A yes must clear the annotator's calibrated threshold and beat the same question over null
    evidence of the same length (a model that ignores the evidence then says no)."""
    p, th = job.prim, job.thresholds.get(which, 0.0)
    if not s.ok:
        p.notes.append(f"{which.upper()}: scoring error: {s.error}")
        return None
    assert s.logodds is not None
    if not _clears(s.logodds, th):
        return False
    if null is not None and null.ok and null.logodds is not None and s.logodds <= null.logodds:
        p.notes.append(f"{which.upper()}: {s.logodds:.2f} does not beat null evidence ({null.logodds:.2f})")
        return False
    return True


def _check_subsets(jobs: Sequence[_Job]) -> None:
    """A yes needs a checked subset (DerivAudit App. B: "some subset implies it"): the annotator names
    the smallest implying subset (or "none"), and the question is asked again over those passages
    alone; the yes stands only if the subset still clears the threshold. One retry for an answer
    that names no valid passage. A named subset refused on rescoring gets one more candidate, the
    passages closest in wording to the obligation (a 1.5B annotator often names the wrong
    passage of a right answer). A yes whose subset cannot be had becomes no, with a note."""
    yes = [(job, which) for job in jobs for which in ("e", "r") if getattr(job.prim, which)]
    # A one-passage view has one non-empty subset, the view itself: naming it is not asked (a 1.5B
    # annotator names a passage 2 there and its yes was lost; 13 primitives on LoCoMo dev).
    named: dict[tuple[int, str], list[int]] = {(id(job), which): [1] for job, which in yes
                                                if len(job.item.passages) == 1}
    pending = [(job, which) for job, which in yes if (id(job), which) not in named]
    last_error: dict[tuple[int, str], str] = {}
    for attempt in range(2):
        if not pending:
            break
        reqs = []
        for job, which in pending:
            it = job.item
            task = templates.render("der_subset", obligation=templates.line(it.obligation.text),
                                    polarity=job.polarity[which])
            if attempt:
                task += f"\nYour previous answer could not be used ({last_error[(id(job), which)]}). " \
                        f"Answer with passage numbers between 1 and {len(it.passages)}, or none."
            reqs.append((job.backend, Prompt(it.shared, task, answer_prefix="Passages:")))
        texts = generate_all(reqs, max_new_tokens=12, stop=("\n\n",))
        failed = []
        for (job, which), text in zip(pending, texts, strict=True):
            try:
                named[(id(job), which)] = parse_subset(text, len(job.item.passages))
            except ValueError as e:
                last_error[(id(job), which)] = str(e)
                failed.append((job, which))
        pending = failed
    for job, which in pending:
        job.prim.notes.append(f"{which.upper()} subset: {last_error[(id(job), which)]}; not a yes")
        setattr(job.prim, which, False)
    checks = []
    for job in jobs:
        for which in ("e", "r"):
            nums = named.get((id(job), which))
            if nums is None or not getattr(job.prim, which):
                continue
            if not nums:
                job.prim.notes.append(f"{which.upper()}: the annotator named no implying passage; not a yes")
                setattr(job.prim, which, False)
                continue
            checks.append((job, which, nums))
    retry = []
    for job, which, nums, note in _rescore_subsets(checks):
        alt = lexical_subset(job.item, SUBSET_FALLBACK)
        if alt and alt != nums:
            job.prim.notes.append(note)
            retry.append((job, which, alt))
        else:
            _refuse(job, which, note)
    for job, which, _, note in _rescore_subsets(retry, "the passages closest in wording: "):
        _refuse(job, which, note)


def _refuse(job: _Job, which: str, note: str) -> None:
    job.prim.notes.append(f"{note}; not a yes")
    setattr(job.prim, which, False)


# Passages in the one lexical candidate. One candidate, not a search from one passage up: every
# extra check of a yes is another chance for a noise yes at the calibrated threshold (trying 1, 2,
# then 3 passages turned one unsupported write supported on each gold set).
SUBSET_FALLBACK = 3


def lexical_subset(item: Item, k: int) -> list[int]:
    """The `k` passages that share most words with the obligation (BM25 over the view's passages),
    a second candidate for "some subset implies it" when the annotator named the wrong one. Always
    a proper subset (at most all passages but one; none for a one-passage view)."""
    return closest(item, min(k, len(item.passages) - 1))


def closest(item: Item, k: int) -> list[int]:
    """The `k` passages of the view that share most words with the obligation (BM25; ties to the
    earlier passage), as 1-based numbers in view order."""
    if k < 1 or not item.passages:
        return []
    bm25 = BM25Okapi([tokenize(p.text) or ["\0"] for p in item.passages])
    scores = bm25.get_scores(tokenize(item.obligation.text))
    best = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
    return sorted(i + 1 for i in best)


def _slot_passages(item: Item, p: Primitives) -> list[int]:
    """The passages about the same event: the subset the annotator named and checked for E, else
    the one passage closest in wording."""
    return list(p.e_subset) if p.e and p.e_subset else closest(item, 1)


def _slot_checks(jobs: Sequence[_Job], wanted: Callable[[int, str], bool], index: dict[int, int]) -> None:
    """S for every job whose obligation asserts a slot and whose R is not already yes: the question
    is asked over the same-event passages alone (so a yes is checked on its subset by
    construction) and must clear the annotator's calibrated S threshold and beat null passages of
    the same count. A yes feeds R (same subject and event, something else stated: DerivAudit's
    refutation), with the passages as its subset and a note; the label rule is unchanged."""
    todo = [job for job in jobs if job.item.slot is not None and job.item.passages and not job.prim.r
            and wanted(index[id(job)], "s") and math.isfinite(job.thresholds.get("s", 0.0))]
    if not todo:
        return
    chosen = [_slot_passages(job.item, job.prim) for job in todo]
    scores = score_all([(job.backend, _prompt(job.item.subset_shared(nums), job.task("s")))
                        for job, nums in zip(todo, chosen, strict=True)])
    clear = [k for k, (job, sc) in enumerate(zip(todo, scores, strict=True))
             if sc.ok and sc.logodds is not None and _clears(sc.logodds, job.thresholds.get("s", 0.0))]
    nulls = score_all([(todo[k].backend, _prompt(passages_block(null_passages(len(chosen[k]))), todo[k].task("s")))
                       for k in clear])
    null_of = dict(zip(clear, nulls, strict=True))
    for k, (job, nums, sc) in enumerate(zip(todo, chosen, scores, strict=True)):
        p = job.prim
        p.scores["s"] = sc.logodds
        if k in null_of:
            p.scores["s_null"] = null_of[k].logodds
        p.s = _decide(job, "s", sc, null_of.get(k))
        p.s_subset = nums
        if p.s:
            slot = job.item.slot
            p.r, p.r_subset = True, list(nums)
            p.notes.append(f"R: yes from the slot check: passages {nums} give a different {slot.name} "
                           f"than {slot.value!r}")


def _rescore_subsets(checks: Sequence[tuple[_Job, str, list[int]]], what: str = ""):
    """Ask each yes again over its subset alone; record the subset and score; return the failures,
    each with its note (the caller adds it, so "not a yes" lands on the note of that primitive). A
    subset that is the whole view is the question already asked: its score is reused, not recomputed
    (a one-passage view's subset always is)."""
    def whole(job: _Job, nums: list[int]) -> bool:
        return nums == list(range(1, len(job.item.passages) + 1))

    asked = [(job, which, nums) for job, which, nums in checks if not whole(job, nums)]
    fresh = iter(score_all([(job.backend, _prompt(job.item.subset_shared(nums), job.task(which)))
                            for job, which, nums in asked]))
    scores = [Score(job.prim.scores[which]) if whole(job, nums) else next(fresh) for job, which, nums in checks]
    failed = []
    for (job, which, nums), sc in zip(checks, scores, strict=True):
        job.prim.scores[f"{which}_subset"] = sc.logodds
        setattr(job.prim, f"{which}_subset", nums)
        th = job.thresholds.get(which, 0.0)
        if not sc.ok or sc.logodds is None or not _clears(sc.logodds, th):
            failed.append((job, which, nums, f"{which.upper()}: {what}passages {nums} alone do not imply it "
                           f"({'error' if sc.logodds is None else f'{sc.logodds:.2f}'} < {th:.2f})"))
    return failed


Task = tuple[str, Verdict]  # a question after the evidence block, and the answer words it is read from
Asker = tuple[Backend, Callable[[int, Item], Task], Callable[[int, Item, str], Task], dict[str, float]]


def _prompt(shared: str, task: Task) -> Prompt:
    return Prompt(shared, task[0], verdict=task[1])


def _answers(items: Sequence[Item], askers: Sequence[Asker],
             asked: Sequence[frozenset[str]] | None = None,
             polarity: dict[str, str] | None = None) -> list[list[Primitives]]:
    """For each asker (backend, D prompt, E/R prompt, thresholds): D from the record alone (argmax);
    where the view has passages, E and R over the passages and, for a score that clears the
    asker's threshold, over null passages of the same length (a score below it is a no whatever
    the null says, so its null question is not asked); then every yes checked on its implying
    subset. All askers go out together, so annotators on one backend share each evidence prefix. A
    view with no passages implies nothing: E and R are 'no' there without asking. `asked` limits
    item k to the primitives in asked[k] (the others stay unanswered: None for D, no for E/R)."""
    def wanted(k: int, which: str) -> bool:
        return asked is None or which in asked[k]

    def run(slots: list[tuple[int, int, str]], prompt: Callable[[int, int, str], Prompt]) -> None:
        scores = score_all([(askers[j][0], prompt(j, k, which)) for j, k, which in slots])
        for (j, k, which), s in zip(slots, scores, strict=True):
            prims[j][k].scores[which] = s.logodds
            got[(j, k, which)] = s
            if s.ok and s.bounded:  # the server's top-k cap decided it: the report counts these
                prims[j][k].notes.append(f"{which.upper()}: {BOUNDED} (yes or no outside the top {s.k})")

    prims = [[Primitives(None, False, False) for _ in items] for _ in askers]
    got: dict[tuple[int, int, str], Score] = {}
    first = [(j, k, which) for j in range(len(askers)) for k, it in enumerate(items)
             for which in ("d", "e", "r") if wanted(k, which) and (which == "d" or it.passages)]
    run(first, lambda j, k, which: _prompt("", askers[j][1](k, items[k])) if which == "d"
        else _prompt(items[k].shared, askers[j][2](k, items[k], which)))
    nulls = [(j, k, f"{which}_null") for j, k, which in first if which != "d" and got[(j, k, which)].ok
             and got[(j, k, which)].logodds is not None
             and _clears(got[(j, k, which)].logodds, askers[j][3].get(which, 0.0))]
    run(nulls, lambda j, k, which: _prompt(items[k].null_shared, askers[j][2](k, items[k], which[0])))
    jobs, index = [], {}
    for j, (be, _, er_task, th) in enumerate(askers):
        for k, it in enumerate(items):
            p = prims[j][k]
            if wanted(k, "d"):
                p.d = _yes(got[(j, k, "d")], p.notes, "D")
            job = _Job(it, p, be, lambda which, k=k, it=it, er_task=er_task: er_task(k, it, which), th,
                       dict(polarity or POLARITY))
            for which in ("e", "r"):
                if it.passages and wanted(k, which):
                    setattr(p, which, _decide(job, which, got[(j, k, which)], got.get((j, k, f"{which}_null"))))
            jobs.append(job)
            index[id(job)] = k
    _check_subsets(jobs)
    _slot_checks(jobs, wanted, index)
    return prims


def question(which: str, wording: str) -> str:
    """The prompt file of an annotator's E, R or S question (R is a three-way choice: see QUESTIONS)."""
    return f"{QUESTIONS[which]}_{wording}"


def slot_fields(slot: slots.Slot | None) -> dict[str, str]:
    """The S question's slot and value placeholders (none for E and R)."""
    return {"slot": slot.name, "value": slot.value} if slot else {}


def ask(name: str, **fields: str) -> Task:
    """An annotation question: every field (record, claim, assessments) on its own labeled line."""
    return templates.render(name, **{k: templates.line(v) for k, v in fields.items()}), templates.verdict(name)


def _asker(annotator: Annotator) -> Asker:
    v = annotator.wording
    return (
        annotator.backend,
        lambda k, it: ask(f"der_d_{v}", record=it.write.text, obligation=it.obligation.text),
        lambda k, it, which: ask(question(which, v), obligation=it.obligation.text,
                                 **(slot_fields(it.slot) if which == "s" else {})),
        annotator.thresholds,
    )


def primitives(items: Sequence[Item], annotator: Annotator) -> list[Primitives]:
    """One annotator's D/E/R primitives for each item, with its prompt wording."""
    return _answers(items, [_asker(annotator)])[0]


def _order(item: Item) -> bool:
    """Seeded coin: whether annotator A's primitives are shown first to the adjudicator."""
    seed = hashlib.sha256(f"{item.obligation.obligation_id}|{item.view}".encode()).digest()
    return random.Random(seed).random() < 0.5


def adjudicate(items: Sequence[Item], a: Sequence[Primitives], b: Sequence[Primitives],
               adjudicator: Annotator) -> list[Primitives]:
    """The adjudicator's own primitives for each item, seeing both assessments in seeded random
    order as 'Assessment 1' and 'Assessment 2' only. It is asked only the primitives in dispute
    (App. B: only disagreements are adjudicated); where A and B agree, their answer stands."""
    shown = [(a[k], b[k]) if _order(it) else (b[k], a[k]) for k, it in enumerate(items)]

    def fields(k: int, it: Item, part: Callable[[Primitives], str] = Primitives.describe) -> dict[str, str]:
        return {"obligation": it.obligation.text, "first": part(shown[k][0]), "second": part(shown[k][1])}

    # R in dispute is asked again with its slot check (an S yes of one annotator is an R yes)
    disputed = [frozenset(w for w in ("d", "e", "r") if getattr(a[k], w) != getattr(b[k], w))
                | ({"s"} if a[k].r != b[k].r else set()) for k in range(len(items))]

    def er_task(k: int, it: Item, which: str) -> Task:
        if which != "s":
            return ask(ADJUDICATE[which], **fields(k, it))
        slot = it.slot.name if it.slot else ""
        return ask(ADJUDICATE["s"], **fields(k, it, lambda p: p.describe_s(slot)), **slot_fields(it.slot))

    out = _answers(items, [(
        adjudicator.backend,  # D stays evidence-blind: its question shows the D answers only
        lambda k, it: ask("adjudicate_d", record=it.write.text, **fields(k, it, Primitives.describe_d)),
        er_task,
        adjudicator.thresholds,
    )], asked=disputed)[0]
    for k, adj in enumerate(out):
        settle_agreed(adj, a[k], b[k], asked=disputed[k])
    return out


@dataclass
class Settled:
    """One item's answers from annotators A and B, and the adjudicator's where it was asked: the
    write audit's (`Annotation`) and the lifecycle audit's (`lifecycle.Judged`) alike."""

    item: Item
    a: Primitives
    b: Primitives
    adjudicated: Primitives | None

    @property
    def final(self) -> Primitives:
        return self.adjudicated or self.a


@dataclass
class Annotation(Settled):
    @property
    def label(self) -> str:
        f = self.final
        return obligation_label(f.d, f.e, f.r)


def settle_agreed(adj: Primitives, a: Primitives, b: Primitives, asked: frozenset[str] | None = None) -> None:
    """The adjudicator resolves the primitives in dispute only: where A and B agree, their answer
    stands (App. B: only disagreements are adjudicated). `asked`: the primitives the adjudicator
    was asked (the others were not put to it and are taken from A without a note)."""
    for which in ("d", "e", "r"):
        if getattr(a, which) != getattr(b, which):
            continue
        if asked is not None and which not in asked:
            setattr(adj, which, getattr(a, which))
        elif getattr(adj, which) != getattr(a, which):
            adj.notes.append(f"{which.upper()}: A and B agree ({'yes' if getattr(a, which) else 'no'}); "
                             f"the adjudicator's {'yes' if getattr(adj, which) else 'no'} is not used")
            setattr(adj, which, getattr(a, which))
        else:
            continue
        if which != "d":
            setattr(adj, f"{which}_subset", list(getattr(a, f"{which}_subset")))
        if which == "r":  # R agreed: the slot check behind it is A's
            adj.s, adj.s_subset = a.s, list(a.s_subset)


def annotate(items: Sequence[Item], a: Annotator, b: Annotator, adjudicator: Annotator) -> list[Annotation]:
    """Two independent annotators; only disagreements (any of D, E, R differs) are adjudicated."""
    pa, pb = _answers(items, [_asker(a), _asker(b)])  # independent prompts, one round trip
    disagree = [k for k in range(len(items)) if pa[k].answers != pb[k].answers]
    adj = adjudicate([items[k] for k in disagree], [pa[k] for k in disagree], [pb[k] for k in disagree],
                     adjudicator) if disagree else []
    by_k = dict(zip(disagree, adj, strict=True))
    return [Annotation(items[k], pa[k], pb[k], by_k.get(k)) for k in range(len(items))]
