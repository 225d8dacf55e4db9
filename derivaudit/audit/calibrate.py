"""Per-model thresholds for the E and R primitives (DerivAudit, App. F's "FPR <= 0.10 on held-out
negatives" procedure, applied to the annotators' own questions).

Small models say "yes" to almost any question about long evidence, so a primitive's yes is read
at a threshold picked from items whose answer is known, built from the log itself:
- E positives: a passage's own words as the statement ("Caroline said: ..."), over evidence that
  contains the passage;
- E negatives: a statement of the same conversation from at least two windows away, over the same
  evidence: what the judge meets in a scan is a statement about the same people and topics that
  the shown turns do not contain. (A negative from another conversation, as before, has other
  names and topics and is rejected at any threshold, so the FPR <= 0.10 pick landed far too low:
  on LoCoMo dev, A's E at 0.18 against 0.98 with same-conversation negatives, and 11 of 36
  unsupported or contradicted dev writes called supported.) A conversation too short for that
  falls back to another conversation's statement;
- R positives: the template negation of a passage statement ("It is not true that Caroline said:
  ..."), over evidence that contains the passage;
- R negatives: the E positives and E negatives (shown true, or not addressed at all);
- S positives (the slot check): a passage that states a time or a quantity, as a statement with
  that value changed (slots.perturb: "three years" -> "five years"), over that passage alone;
- S negatives: the same statement with the passage's own value, and a slot-bearing statement from
  another conversation, over the same passage.
The threshold is the lowest log-odds whose false-positive rate on the negatives is at most 0.10;
its true-positive rate on the positives says whether the annotator can tell at all.

Which turns the items come from (`corpus`): by default ("log") the scanned log's own turns. A
packaged corpus of hand-written conversations (derivaudit/data/calibration.jsonl, "packaged") gives
the same prompts for every log, so the result cache scores them once per judge and every later log
is calibrated for free — but a threshold is a property of the judge *on
data of a kind*, not of the judge alone: the corpus's six short conversations are on unrelated
topics, and with other-conversation negatives its E threshold landed lower (Qwen2.5-Coder-1.5B:
-0.15 against +0.24 on LoCoMo's own items) and LoCoMo's conv-42/44 dev writes fell from 18 to 11
of 24 (docs/benchmarks.md; not re-measured with same-conversation negatives, which its 16-turn
conversations are too short for). A path names a memory log of the user's own, in their data's
style, scored once and cached like the packaged corpus.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..admission.operating import TARGET_FPR
from ..log.records import MemoryLog, Turn
from ..models.base import Backend, Prompt
from ..rates.stats import auc
from . import slots

PACKAGED = Path(__file__).resolve().parent.parent / "data" / "calibration.jsonl"
CORPORA = ("packaged", "log")  # or a path to a memory log

MIN_WORDS = 6  # a passage must say something to become a statement


@dataclass(frozen=True)
class Threshold:
    """Answer yes when score >= value."""

    value: float
    fpr: float | None  # realised on the negatives
    tpr: float | None  # on the positives
    auc: float | None
    n_pos: int
    n_neg: int

    def to_dict(self) -> dict[str, float | int | str | None]:
        d = asdict(self)
        d["value"] = self.value if math.isfinite(self.value) else str(self.value)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Threshold:
        return cls(**{**d, "value": float(d["value"])})


def pick(pos: Sequence[float], neg: Sequence[float], target: float = TARGET_FPR) -> Threshold:
    """The lowest threshold whose false-positive rate on `neg` is at most `target` (scores equal
    to the threshold count as yes). The rate only changes just above a negative score, so the
    candidates are -inf and the values just above each negative."""
    negs = sorted(set(neg))
    chosen = math.inf
    for t in [-math.inf, *(math.nextafter(x, math.inf) for x in negs)]:
        if not neg or sum(x >= t for x in neg) / len(neg) <= target:
            chosen = t
            break
    fpr = sum(x >= chosen for x in neg) / len(neg) if neg else None
    tpr = sum(x >= chosen for x in pos) / len(pos) if pos else None
    return Threshold(chosen, fpr, tpr, auc(pos, neg), len(pos), len(neg))


@dataclass(frozen=True)
class Item:
    kind: str  # "e" | "r" | "s"
    statement: str
    passages: tuple[Turn, ...]
    positive: bool
    slot: slots.Slot | None = None  # S items: the value the statement asserts


@cache
def _load(path: str) -> MemoryLog:
    from ..log.io import load_log

    return load_log(path)


def corpus(source: str, log: MemoryLog) -> MemoryLog:
    """The turns the calibration items are built from: the packaged corpus, `log` itself, or the
    memory log at path `source` (a LogError names its file, line and field)."""
    if source == "log":
        return log
    return _load(str(PACKAGED if source == "packaged" else Path(source).expanduser().resolve()))


def corpus_name(source: str) -> str:
    """How meta.json records the corpus: "packaged", "log", or the file's name and content hash
    (the thresholds belong to those turns, wherever the file is later)."""
    if source in CORPORA:
        return source
    p = Path(source).expanduser()
    return f"{p.name}@{hashlib.sha256(p.read_bytes()).hexdigest()[:12]}"


def said(t: Turn) -> str:
    return f'{t.speaker} said: "{" ".join(t.text.split())}"'


def negated(t: Turn) -> str:
    return f'It is not true that {t.speaker} said: "{" ".join(t.text.split())}"'


def build_items(log: MemoryLog, n: int = 24, window: int = 8, per_window: int = 2, seed: int = 0) -> list[Item]:
    """Up to `n` E positives (each with an E negative and an R positive) over windows of `window`
    consecutive turns of one conversation, `per_window` statements per window. Deterministic for a
    log and seed."""
    rng = random.Random(seed)
    convs = sorted(log.conversations)
    items: list[Item] = []
    starts = [(c, i) for c in convs for i in range(0, max(1, len(log.conversations[c].turns) - window + 1), window)]
    rng.shuffle(starts)
    for conv, i in starts:
        if len(items) >= 3 * n:
            break
        turns = log.conversations[conv].turns
        evidence = tuple(turns[i : i + window])
        inside = [t for t in evidence if len(t.text.split()) >= MIN_WORDS]
        others = distant_turns(log, conv, i, window)
        if not inside or not others:
            continue
        for p in rng.sample(inside, min(per_window, len(inside))):
            q = rng.choice(others)
            items += [Item("e", said(p), evidence, True), Item("e", said(q), evidence, False),
                      Item("r", negated(p), evidence, True)]
    return items[: 3 * n]


def distant_turns(log: MemoryLog, conv: str, i: int, window: int) -> list[Turn]:
    """Turns that can be negatives for statements near turn `i`: the same people and topics, at least
    two windows away (before or after); another conversation's only when the conversation is too
    short. A negative from elsewhere is rejected at any threshold and says nothing about the
    statements a scan meets."""
    turns = log.conversations[conv].turns
    return [t for j, t in enumerate(turns) if abs(j - i) >= 2 * window and len(t.text.split()) >= MIN_WORDS] \
        or [t for c in sorted(log.conversations) if c != conv for t in log.conversations[c].turns
            if len(t.text.split()) >= MIN_WORDS]


def build_slot_items(log: MemoryLog, n: int = 24, seed: int = 0) -> list[Item]:
    """Up to `n` S positives, each with two S negatives (its own value; another conversation's
    statement), from passages that state a time or a quantity. Deterministic for a log and seed."""
    rng = random.Random(seed)
    convs = sorted(log.conversations)
    bearing = {c: [(i, t, sl) for i, t in enumerate(log.conversations[c].turns) if len(t.text.split()) >= MIN_WORDS
                   and (sl := slots.find(t.text, None, ())) is not None and sl.name in ("time", "quantity")]
               for c in convs}
    pool = [(c, i, t, sl) for c in convs for i, t, sl in bearing[c]]
    rng.shuffle(pool)
    items: list[Item] = []
    for conv, i, t, sl in pool:
        if len(items) >= 3 * n:
            break
        other = slots.perturb(sl)
        # another event: another conversation's, or (one conversation) one from 16+ turns away
        others = [x for c in convs if c != conv for x in bearing[c]] or [
            x for x in bearing[conv] if abs(x[0] - i) >= 16]
        if other is None or not others:
            continue
        _, q, qsl = rng.choice(others)
        changed = said(t).replace(sl.value, other, 1)
        items += [Item("s", changed, (t,), True, slots.Slot(sl.name, other)),
                  Item("s", said(t), (t,), False, sl), Item("s", said(q), (t,), False, qsl)]
    return items[: 3 * n]


def items_key(items: Sequence[Item]) -> str:
    """Identifies an item set (for the calibration cache)."""
    h = hashlib.sha256()
    for it in items:
        slot = f"|{it.slot.name}={it.slot.value}" if it.slot else ""
        h.update(f"{it.kind}|{it.positive}|{it.statement}|{'|'.join(t.turn_id for t in it.passages)}{slot}\n"
                 .encode())
    return h.hexdigest()[:16]


def annotator_task(wording: str):
    """An annotator's E/R/S question for a statement (`wording`)."""
    from .annotate import ask, question, slot_fields

    return lambda which, statement, slot=None: ask(question(which, wording), obligation=statement,
                                                   **slot_fields(slot))


def adjudicator_task():
    """The adjudicator's E/R question as it meets it: after two assessments that disagree on that
    primitive (one yes, one no, in an order seeded by the statement)."""
    from .annotate import ADJUDICATE, Primitives, ask, slot_fields

    def task(which: str, statement: str, slot: slots.Slot | None = None):
        if which == "s":
            yes, no = (Primitives(True, False, True, s=x).describe_s(slot.name) for x in (True, False))
        else:
            yes = Primitives(True, which == "e", which == "r").describe()
            no = Primitives(True, False, False).describe()
        coin = random.Random(hashlib.sha256(statement.encode()).digest()).random() < 0.5
        first, second = (yes, no) if coin else (no, yes)
        return ask(ADJUDICATE[which], obligation=statement, first=first, second=second, **slot_fields(slot))

    return task


def calibrate(backend: Backend, wording: str, log: MemoryLog, n: int = 24, target: float = TARGET_FPR,
              task=None) -> dict[str, Any]:
    """Score the calibration items with one annotator's E and R questions (`wording`,
    or `task(which, statement) -> (question, verdict)`, e.g. `adjudicator_task()`) and pick its
    thresholds. Returns thresholds and health: TPR at the target FPR, AUC, the share of items
    answered yes to both E and R, and the correlation of E and R scores."""
    return calibrate_many([(backend, wording, task)], log, n, target)[0]


def calibrate_many(annotators: Sequence[tuple[Backend, str, Any]], log: MemoryLog, n: int = 24,
                   target: float = TARGET_FPR, with_slots: Sequence[bool] | None = None) -> list[dict[str, Any]]:
    """`calibrate` for several (backend, wording, task) at once: one scoring call, so annotators on
    one backend share each evidence window's prefix (scores are the same as calibrating each alone).
    `with_slots[k]` False leaves annotator k's S items unscored (no "s" threshold): the
    adjudicator's S threshold is needed only when the annotators' S check is on."""
    from .annotate import score_all

    items = build_items(log, n=n)
    e_items = [it for it in items if it.kind == "e"]
    r_pos = [it for it in items if it.kind == "r"]
    s_items = build_slot_items(log, n=n)
    with_slots = list(with_slots) if with_slots is not None else [True] * len(annotators)

    reqs: list[tuple[Backend, Prompt]] = []
    spans = []
    for (backend, wording, task), slotted in zip(annotators, with_slots, strict=True):
        task = task or annotator_task(wording)
        start = len(reqs)
        reqs += _prompts(backend, task, e_items, "e") + _prompts(backend, task, e_items, "r") + _prompts(
            backend, task, r_pos, "r") + (_prompts(backend, task, s_items, "s") if slotted else [])
        spans.append((start, len(reqs), slotted))
    scores = score_all(reqs)
    return [_pick_all([s.logodds for s in scores[a:b]], items, e_items, s_items if slotted else [], target)
            for a, b, slotted in spans]


def calibrate_slots(backend: Backend, wording: str, log: MemoryLog, n: int = 24, target: float = TARGET_FPR,
                    task=None) -> Threshold | None:
    """One annotator's S threshold alone (None: the log gives no S items): the same items and
    scores as in `calibrate_many`."""
    from .annotate import score_all

    s_items = build_slot_items(log, n=n)
    if not s_items:
        return None
    scores = score_all(_prompts(backend, task or annotator_task(wording), s_items, "s"))
    return pick(*_pos_neg([s.logodds for s in scores], s_items), target)


def add_slots(cals: list[dict[str, Any]], rest: Sequence[tuple[Backend, str, Any]], log: MemoryLog,
              n: int = 24, target: float = TARGET_FPR) -> str | None:
    """Give annotator B (`rest[0]`) and then the adjudicator (`rest[1]`) their S thresholds, each only
    once the annotators before it separate their own S items, and say why the slot check is off
    (None: on). The check needs both annotators (`slot_check_off`), so when A cannot tell B's S items
    are never scored, and the adjudicator's only when both can: the same thresholds and the same
    decision as scoring them all, and B's 3n S prompts never computed on a judge whose A cannot
    (Qwen2.5-Coder-1.5B on LoCoMo; the saving there is not yet measured: bench_calibration.py).
    `cals[k]["thresholds"]` gains "s" in place."""
    for k, (backend, wording, task) in enumerate(rest, start=1):
        if why := slot_check_off(cals[:k]):  # B needs A to separate; the adjudicator needs A and B
            return why
        if (t := calibrate_slots(backend, wording, log, n, target, task=task)) is not None:
            cals[k]["thresholds"]["s"] = t
            cals[k]["slot_items"] = len(build_slot_items(log, n=n))
    return slot_check_off(cals[:2])


def _prompts(backend: Backend, task: Any, its: Sequence[Item], which: str) -> list[tuple[Backend, Prompt]]:
    """`which`'s question about each item's statement, over the item's passages."""
    from .annotate import passages_block

    out = []
    for it in its:
        question, verdict = task(which, it.statement, it.slot) if which == "s" else task(which, it.statement)
        out.append((backend, Prompt(passages_block(it.passages), question, verdict=verdict)))
    return out


def _pos_neg(vals: Sequence[float | None], its: Sequence[Item]) -> tuple[list[float], list[float]]:
    """The scores of the positive and of the negative items (scoring errors left out)."""
    pairs = [(v, it.positive) for v, it in zip(vals, its, strict=True) if v is not None]
    return [v for v, pos in pairs if pos], [v for v, pos in pairs if not pos]


def _pick_all(vals: Sequence[float | None], items: Sequence[Item], e_items: Sequence[Item],
              s_items: Sequence[Item], target: float) -> dict[str, Any]:
    s_vals = vals[len(vals) - len(s_items):]
    vals = vals[: len(vals) - len(s_items)]
    e_scores, r_on_e, r_scores = vals[: len(e_items)], vals[len(e_items): 2 * len(e_items)], vals[2 * len(e_items):]
    e_pos, e_neg = _pos_neg(e_scores, e_items)
    r_p = [v for v in r_scores if v is not None]
    r_n = [v for v in r_on_e if v is not None]
    th = {"e": pick(e_pos, e_neg, target), "r": pick(r_p, r_n, target)}
    if s_items:  # a log with no time or count in its turns leaves S at argmax (health says so)
        th["s"] = pick(*_pos_neg(s_vals, s_items), target)
    both = [(e, r) for e, r in zip(e_scores, r_on_e, strict=True) if e is not None and r is not None]
    yes_yes = (sum(e >= th["e"].value and r >= th["r"].value for e, r in both) / len(both)) if both else None
    # the calibration scores themselves: the scale on which a write's confidence is read (trust.py)
    scale = {"e": {"pos": _rounded(e_pos), "neg": _rounded(e_neg)}, "r": {"pos": _rounded(r_p), "neg": _rounded(r_n)}}
    return {"thresholds": th, "scale": scale, "items": len(items), "slot_items": len(s_items),
            "items_key": items_key([*items, *s_items]), "scoring_errors":
            sum(v is None for v in vals), "yes_yes": yes_yes, "e_r_correlation": _corr(both),
            "target_fpr": target}


def _rounded(xs: Sequence[float]) -> list[float]:
    return sorted(round(float(x), 4) for x in xs)


def _corr(pairs: Sequence[tuple[float, float]]) -> float | None:
    if len(pairs) < 3:
        return None
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    return sxy / (sx * sy) if sx and sy else None


def usable(th: Threshold) -> float:
    """The threshold as a number the annotator can use (argmax 0 when it is not finite)."""
    return th.value if math.isfinite(th.value) else 0.0


MIN_AUC = 0.6  # below it an annotator cannot separate its own calibration items for a primitive


def separates(t: Threshold | None) -> bool:
    """The annotator tells its own positives from negatives for this primitive (AUC >= MIN_AUC and
    some true positive at the target false-positive rate)."""
    return t is not None and t.auc is not None and t.auc >= MIN_AUC and bool(t.tpr)


def slot_check_off(cals: Sequence[dict[str, Any]]) -> str | None:
    """Why the slot check is not used in this scan, or None when it is. It is a two-annotator
    primitive like E and R: it is used only when both annotators separate their own S items; a
    judge that cannot (Qwen2.5-Coder-1.5B on LoCoMo: AUC 0.60 and 0.39) would add noise yeses, so
    its labels are what E and R give, and the report says so."""
    for role, cal in zip(("A", "B"), cals, strict=False):
        t = cal["thresholds"].get("s")
        if t is None:
            return "the log gives no calibration items for it (no turn states a time or a count)"
        if not separates(t):
            auc = "n/a" if t.auc is None else f"{t.auc:.2f}"
            return (f"annotator {role} cannot separate its own calibration items for it (AUC {auc}, TPR at FPR "
                    f"<= {cal['target_fpr']:.2f} {t.tpr or 0:.2f}); a stronger judge may")
    return None


def health_warning(role: str, cal: dict[str, Any]) -> str | None:
    """A loud warning when an annotator cannot separate its own calibration items, or when the log
    gave none to calibrate on (a different problem, with a different remedy)."""
    if not cal["items"]:
        return (f"annotator {role} is not calibrated: the calibration turns yield no items (they need "
                f"{MIN_WORDS}+-word turns in a window of 8 consecutive turns and statements from another "
                "conversation or from 16+ turns later), so E and R are read at argmax (log-odds > 0), "
                "where small models say yes too often; calibrate on a larger log of the same kind "
                "(--calibrate-on FILE) or on the packaged corpus (--calibrate-on packaged)")
    # S is switched off, not trusted, when it cannot separate (slot_check_off): no warning here
    weak = [k.upper() for k, t in cal["thresholds"].items() if k != "s" and not separates(t)]
    if not weak:
        return None
    return (f"annotator {role} cannot separate its own calibration items for {', '.join(weak)} "
            f"(AUC < 0.6 or no true positive at FPR <= {cal['target_fpr']:.2f}): its labels are not trustworthy")
