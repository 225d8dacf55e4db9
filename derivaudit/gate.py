"""The admission gate as a library call, for memory systems that verify at write time; `derivaudit
check` is this same call on the command line.

    from derivaudit import admit
    verdict = admit("Alex is moving to Boston for the new job.",
                    ["Alex: I accepted the job in Boston.", "Alex: We move next month."],
                    view="obligation")
    if verdict["decision"]: store(...)

The threshold defaults to argmax (log-odds > 0). Small models are poorly calibrated: take a
threshold from a replay of your own data (`derivaudit replay RUN --point crossfit`, the
`thresholds` in RUN/replay.json) and pass it.

How the record is split for the views that need parts (`split`): "decompose" (admit's default)
asks the model for the record's obligations and QA pairs; "record" (check's default) uses the
record itself as its one obligation, claim and answer, so nothing is generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from .models import Backend, default_backend, default_model, load_backend
from .records import Write
from .replay import Case, qa_pairs, score_cases
from .stats import clears
from .views import Memory, get_view

SPLITS = ("decompose", "record")


@cache
def _backend(backend: str, model: str, use_cache: bool) -> Backend:
    return load_backend(backend, model, cache=use_cache)


def _passage(p: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(p, dict):
        return p
    speaker, sep, text = p.partition(": ")
    return {"speaker": speaker, "text": text} if sep and len(speaker) <= 40 else {"text": p}


def record_memory(record: str) -> Memory:
    """The record as its own single obligation, claim and QA answer (split="record")."""
    return Memory(record, [("fact", record)], [("What is recorded?", record)])


def admit(record: str, passages: Sequence[str | dict[str, Any]], *, view: str = "obligation",
          model: str | None = None, backend: str | None = None, verifier: Backend | None = None,
          obligations: Sequence[tuple[str, str]] | None = None, threshold: float = 0.0,
          combine: str = "min", use_cache: bool = True, split: str = "decompose") -> dict[str, Any]:
    """Score one candidate memory against the passages it was derived from (time order) with one
    verification view; return score, threshold and decision (admit when score > threshold, or
    >= for a fitted threshold other than 0), the per-part log-odds, and `verdict`: the deciding
    part's full score (its first scoring error, else its lowest part)."""
    if not record.strip():
        raise ValueError("record is empty")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    v = get_view(view)
    be = verifier or _backend(backend or default_backend(), model or default_model(), use_cache)
    if split == "record" and obligations is None:
        memory = record_memory(record)
    else:
        if obligations is None and v.needs_obligations:
            from .annotate import decompose

            w = Write("gate", "gate", record, (), "gate")
            obligations = [(o.kind, o.text) for o in decompose(be, [w])[0].obligations]
        qa = qa_pairs(be, [record])[0] if v.needs_qa else []
        memory = Memory(record, list(obligations or []), qa)
    case = Case("gate", "gate", record, "expanded", [_passage(p) for p in passages], memory, None)
    ((score, parts, details),) = score_cases(be, [case], v, combine, details=True)
    failed = [x for x in details if not x.ok]
    deciding = failed[0] if failed else min(details, key=lambda x: x.logodds)  # a split view passes only if all do
    decision = None if score is None else clears(score, threshold)
    return {"view": view, "score": score, "parts": parts, "threshold": threshold, "decision": decision,
            "obligations": [list(o) for o in memory.obligations], "qa": [list(q) for q in memory.qa],
            "verdict": deciding.to_dict(), "model": be.identity(), "split": split}


def check_document(record: str, passages: Sequence[Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """What `check` reports for one `admit()` result at argmax: the record, the view, the deciding
    part's score and the decision (None on a scoring error)."""
    score = verdict["verdict"]
    return {"record": record, "view": verdict["view"], "passages": len(passages), "model": verdict["model"], **score,
            "decision": None if score["logodds"] is None else ("admit" if verdict["decision"] else "reject"),
            "operating_point": "argmax (log-odds > 0)"}
