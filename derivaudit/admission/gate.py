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

from ..log.records import Write
from ..models import Backend, default_backend, default_model, load_backend
from ..rates.stats import clears
from .replay import Case, qa_pairs, score_cases
from .views import GATE_VIEW, Memory, get_view

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


def admit(record: str, passages: Sequence[str | dict[str, Any]], *, view: str = GATE_VIEW,
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
            from ..audit.decompose import decompose

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


class GateError(Exception):
    """An answer of `derivaudit serve` other than 200: its status, message and the request field."""

    def __init__(self, status: int, message: str, field: str | None = None, code: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {message}" + (f" (field {field})" if field else ""))
        self.status, self.message, self.field, self.code, self.retry_after = status, message, field, code, retry_after


class Client:
    """A client of `derivaudit serve` (standard library only, so a store adds no dependency).

        gate = Client("http://127.0.0.1:8750", token=open("token").read().strip())
        gate.add_turns("conv-1", [{"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston."}])
        verdict = gate.admit({"conversation_id": "conv-1", "text": "Alex lives in Boston.", "citations": ["t1"]})
        if verdict["admit"]: store(...)
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8750", token: str | None = None, timeout: float = 300.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import json
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                err = {"message": raw.decode("utf-8", "replace")[:200] or e.reason}
            retry = e.headers.get("Retry-After")
            raise GateError(e.code, err.get("message", ""), err.get("field"), err.get("code"),
                            float(retry) if retry and retry.isdigit() else None) from None

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def config(self) -> dict[str, Any]:
        return self._call("GET", "/v1/config")

    def add_turns(self, conversation_id: str, turns: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return self._call("POST", "/v1/turns", {"conversation_id": conversation_id, "turns": list(turns)})

    def admit(self, write: dict[str, Any], turns: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The gate's verdict on a candidate write (memory-log fields: conversation_id, text, citations,
        optional write_id and last_seen_turn); `turns`: pre-write history sent with it."""
        body: dict[str, Any] = {"write": write}
        if turns is not None:
            body["turns"] = list(turns)
        return self._call("POST", "/v1/admit", body)
