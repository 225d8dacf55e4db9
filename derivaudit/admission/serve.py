"""The write-time gate as an HTTP service (`derivaudit serve`): the judge loaded once, the operating
point taken from the user's own replay, every decision appended to a memory log that `scan`,
`replay` and `report` read back (write, gate and audit in one loop).

Why Starlette (with uvicorn): the request bodies are memory-log records, validated by the log's own
validator (file:line:field messages, the same rules as `scan`), so FastAPI's pydantic layer would
be a second schema to keep in step; Starlette is the ASGI toolkit FastAPI itself is built on, and
both it and uvicorn already come with the llama.cpp extra (llama-cpp-python's server uses them).

Concurrency: one judge, so model work runs on one worker thread, in arrival order; at most
`Limits.queue` requests wait for it and the next is answered 503 with Retry-After (never an
unbounded backlog). A request that waits past `Limits.timeout` is answered 504 and, if its work
had not started, never judged; work that had started is finished and logged, so a retry with the
same write_id gets that decision back instead of a second judgement (no request answered twice).
A decision is on disk (appended with one write and fsynced) before its answer is sent: a kill -9
loses no answered decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..audit.evidence import ConversationIndex, EvidenceSettings, passage_dict
from ..log.io import check_rows
from ..log.lines import parse_object
from ..log.recordcheck import normalise_ids
from ..models.base import Backend
from ..runs import folder as runs
from ..safe import dumps as json_dumps
from .decision_log import DecisionLog, ServeError
from .views import GATE_VIEW

EVIDENCE_VIEWS = ("expanded", "citation_only")


# ---------------------------------------------------------------- the operating point


@dataclass(frozen=True)
class OperatingPoint:
    """What the gate admits at, and where it came from (a replay of the user's own run)."""

    view: str
    evidence: str
    threshold: float
    combine: str
    point: str  # argmax | crossfit (the replay's operating point, as used)
    model: dict[str, Any]  # the judge's identity the threshold belongs to
    source: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "threshold": _finite(self.threshold)}


def operating_point(run: str | Path, view: str = GATE_VIEW, evidence: str = "expanded") -> OperatingPoint:
    """The operating point of `view`/`evidence` in RUN's replay. At argmax the threshold is 0; at
    crossfit it is refitted on every conversation's negatives together (the replay's per-conversation
    thresholds each left one conversation out to measure; the gate uses all it has)."""
    from .operating import pick_threshold

    run = Path(run)
    if evidence not in EVIDENCE_VIEWS:
        raise ValueError(f"--evidence must be one of {', '.join(EVIDENCE_VIEWS)}, not {evidence!r}")
    rep = runs.read_json_if(run, runs.REPLAY)
    if not isinstance(rep, dict) or not rep.get("settings"):
        raise ValueError(f"{run} has no replay ({runs.REPLAY}): the threshold belongs to a replay of your own data; "
                         f"run `derivaudit replay {run} --view {view}` first")
    key = f"{view}/{evidence}"
    if key not in rep["settings"]:
        raise ValueError(f"{run}'s replay has no setting {key} (it has {', '.join(sorted(rep['settings']))}); "
                         f"run `derivaudit replay {run} --view {view} --evidence {evidence}`")
    m = rep["settings"][key]
    used = m.get("operating_point") or rep.get("operating_point_used") or "argmax"
    source = {"run": str(run.resolve()), "replay": runs.REPLAY, "setting": key, "operating_point": used,
              "reference": (rep.get("reference") or {}).get("labels", "model")}
    if used == "crossfit":
        rows = [r for r in runs.read_rows_if(run, runs.REPLAY_SCORES) if r.get("setting") == key]
        negs: dict[str, list[float]] = {}
        for r in rows:
            if r.get("truth") is False and isinstance(r.get("score"), int | float):
                negs.setdefault(r["conversation_id"], []).append(float(r["score"]))
        if not negs:
            raise ValueError(f"{run}'s {runs.REPLAY_SCORES} holds no scored negative for {key}: nothing to fit a "
                             "threshold on")
        threshold = pick_threshold(negs)
        source["fit"] = (f"conversation-balanced false-positive rate <= 0.10 on {sum(map(len, negs.values()))} "
                         f"negatives of {len(negs)} conversations")
    else:
        threshold = 0.0
        source["fit"] = "argmax (log-odds > 0): the replay found the verifier near-binary or was run at argmax"
    return OperatingPoint(view, evidence, threshold, rep.get("combine", "min"), used, rep.get("model") or {}, source)


def same_judge(point: OperatingPoint, backend: Backend) -> None:
    """Refuse to serve a threshold with another judge than the one it was fitted for."""
    have = backend.identity()
    if point.model != have and point.model not in backend.identity_aliases():  # a replay made before 0.2.1
        raise ValueError(f"the replay in {point.source['run']} was scored by {_ident(point.model)}, but the judge "
                         f"being served is {_ident(have)}: a threshold belongs to the model it was fitted on; "
                         "serve the same model, or replay the run with this one")


def _ident(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items()) if v is not None) or "an unknown model"


# ---------------------------------------------------------------- the gate


@dataclass(frozen=True)
class Limits:
    max_body: int = 1 << 20  # bytes of one request body
    max_turns: int = 20_000  # turns of one conversation (held and sent)
    timeout: float = 120.0  # seconds a request may wait and run
    queue: int = 16  # requests waiting for the judge beyond the one it works on

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Gate:
    """The service's state and its two operations, callable without HTTP (the tests and the
    benchmark's in-process baseline call them directly)."""

    point: OperatingPoint
    backend: Backend
    log: DecisionLog
    limits: Limits = field(default_factory=Limits)
    settings: EvidenceSettings = field(default_factory=EvidenceSettings)
    split: str = "decompose"
    _count: int = 0

    def config(self) -> dict[str, Any]:
        return {"model": self.backend.identity(), "operating_point": self.point.to_dict(), "split": self.split,
                "limits": self.limits.to_dict(), "log": str(self.log.path.resolve()), "derivaudit": __version__}

    # -- turns
    def new_turns(self, conv: str, turns: Any, where: str) -> list[dict[str, Any]]:
        """The request's turns of `conv` as log rows, checked against what the gate holds: a turn it
        holds must be sent unchanged; a new one comes after the last it holds."""
        if not isinstance(turns, list):
            raise ServeError(422, "must be a list of turns", where)
        held = self.log.turns.get(conv, [])
        if len(turns) > self.limits.max_turns:  # before any work: the request alone is over the limit
            raise ServeError(413, f"conversation {conv!r} would hold more than {self.limits.max_turns} turns, the "
                             "gate's limit (--max-turns)", where, "too_large")
        by_id = {t["turn_id"]: t for t in held}
        order = held[-1]["order"] if held else -1
        out: list[dict[str, Any]] = []
        for i, t in enumerate(turns):
            at = f"{where}[{i}]"
            if not isinstance(t, dict):
                raise ServeError(422, "a turn must be an object", at)
            row = {"type": "turn", "conversation_id": conv, **t}
            if row.get("conversation_id") != conv:
                raise ServeError(422, f"is {row.get('conversation_id')!r}, not the request's {conv!r}",
                                 f"{at}.conversation_id")
            tid = row.get("turn_id")
            if isinstance(tid, str) and tid in by_id:
                _check(check_rows("request", [{"order": by_id[tid]["order"], **row}]), {1: at})  # its fields' types
                self._same_turn(by_id[tid], row, conv, at)
                continue
            if "order" not in row:
                row["order"] = order + 1
            if isinstance(row["order"], int) and not isinstance(row["order"], bool) and row["order"] <= order:
                raise ServeError(422, f"is {row['order']}, not after the last turn the gate holds of conversation "
                                 f"{conv!r} (order {order}): new turns come after held ones", f"{at}.order")
            _check(check_rows("request", [row]), {1: at})
            order = row["order"]
            if isinstance(tid, str):
                by_id[tid] = row
            out.append(row)
        if len(held) + len(out) > self.limits.max_turns:
            raise ServeError(413, f"conversation {conv!r} would hold {len(held) + len(out)} turns, over the "
                             f"gate's limit of {self.limits.max_turns} (--max-turns)", where, "too_large")
        return out

    @staticmethod
    def _same_turn(old: dict[str, Any], row: dict[str, Any], conv: str, at: str) -> None:
        """A held turn sent again must be the same turn: every field it sends, as held."""
        changed = sorted(k for k in row if k != "type" and row[k] != old.get(k))
        if changed:
            raise ServeError(409, f"turn {old['turn_id']!r} of conversation {conv!r} differs from the one the gate "
                             f"already holds in {', '.join(changed)} (turns are never rewritten)", at, "conflict")

    def add_turns(self, body: dict[str, Any], started: Callable[[], bool] = lambda: True) -> dict[str, Any]:
        """Add a conversation's turns; `started()` False means the caller gave up before the work
        began (nothing logged)."""
        conv = _conv(body, "conversation_id")
        new = self.new_turns(conv, body.get("turns"), "turns")
        if not started():
            raise ServeError(504, "timed out waiting for the gate", None, "timeout")
        self.log.add(new)
        return {"conversation_id": conv, "added": len(new), "turns": len(self.log.turns.get(conv, []))}

    # -- admission
    def admit(self, body: dict[str, Any], started: Callable[[], bool] = lambda: True) -> dict[str, Any]:
        """Judge one candidate write; `started()` False means its caller gave up before the work began
        (nothing judged, nothing logged)."""
        from .gate import admit

        w = body.get("write")
        if not isinstance(w, dict):
            raise ServeError(422, "missing: the candidate write, an object with conversation_id and text", "write")
        conv = _conv(w, "write.conversation_id")
        write = {"type": "write", "citations": [], **w}
        if "write_id" not in write:
            self._count += 1
            write["write_id"] = f"gate-{time.time_ns():x}-{self._count}"
        wid = write["write_id"]
        if isinstance(wid, str) and wid in self.log.decisions:  # a retry: the recorded answer, not a new one
            old = self.log.decisions[wid]
            if (old.get("conversation_id"), old.get("text"), old.get("citations") or []) != (
                    conv, write.get("text"), write.get("citations") or []):
                raise ServeError(409, f"write {wid!r} was already judged with other content; a write_id names one "
                                 "write", "write.write_id", "conflict")
            return {**_answer(old), "replayed": True}
        new = self.new_turns(conv, body.get("turns", []), "turns") if "turns" in body else []
        held = [*self.log.turns.get(conv, []), *new]
        if not held:
            raise ServeError(404, f"the gate holds no turn of conversation {conv!r}: send the pre-write history "
                             "in `turns` or with POST /v1/turns first", "write.conversation_id", "unknown_conversation")
        write.setdefault("last_seen_turn", held[-1]["turn_id"])
        # a parent_id or supersedes names writes judged before: checked against them (else not read)
        before = self.log.writes_of.get(conv, []) if write.get("parent_id") or write.get("supersedes") else []
        rows = [*held, *before, write]
        log = _check(check_rows("request", rows), {len(rows): "write"}, held=len(rows) - 1)
        if not started():
            raise ServeError(504, "timed out waiting for the judge", None, "timeout")
        view = ConversationIndex(log.conversations[conv]).views(log.writes[-1], self.settings)
        passages = [passage_dict(t) for t in getattr(view, self.point.evidence)]
        text = write["text"]
        res = admit(text, passages, view=self.point.view, verifier=self.backend, threshold=self.point.threshold,
                    combine=self.point.combine, split=self.split)
        parts = _parts(res, self.point.threshold)
        gate = {"decision": None if res["decision"] is None else ("admit" if res["decision"] else "reject"),
                "score": res["score"], "threshold": _finite(self.point.threshold), "view": self.point.view,
                "evidence": self.point.evidence, "combine": self.point.combine, "model": res["model"],
                "parts": parts, "passages": [p["turn_id"] for p in passages],
                "decided_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        row = {**write, "meta": {**(write.get("meta") or {}), "gate": gate}}
        self.log.add(new, row)
        return _answer(row)


def open_gate(point: OperatingPoint, backend: Backend, log: str | Path, limits: Limits | None = None,
              split: str = "decompose") -> Gate:
    """A gate serving `point` with `backend` (refused when it is not the judge the point was fitted
    for), appending to the decision log at `log` (made, or resumed when it is one)."""
    same_judge(point, backend)
    limits = limits or Limits()
    record = {"operating_point": point.to_dict(), "limits": limits.to_dict(), "split": split}
    return Gate(point, backend, DecisionLog(log, record), limits, split=split)


def _conv(d: dict[str, Any], where: str) -> str:
    c = d.get(where.rsplit(".", 1)[-1])
    if not isinstance(c, str) or not c:
        raise ServeError(422, "missing or not a string: the conversation id", where)
    return c


def _check(result: tuple[Any, list[Any]], fields: dict[int, str], held: int = 0) -> Any:
    """The log (validated rows) or a 422 naming the request field of the first problem."""
    log, problems = result
    for p in problems:
        if p.line is not None and p.line <= held:
            continue  # a held turn, already accepted
        where = fields.get(p.line, f"turns[{(p.line or 1) - 1 - held}]")
        raise ServeError(422, p.message, f"{where}.{p.field}" if p.field else where, p.code)
    return log


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def _parts(res: dict[str, Any], threshold: float) -> list[dict[str, Any]]:
    """Per part (obligation, claim or QA pair) its log-odds and whether it clears the threshold."""
    from ..rates.stats import clears

    view_parts = {"obligation": res["obligations"], "qa": res["qa"]}.get(res["view"]) or [[res["view"], None]]
    out = []
    for i, lo in enumerate(res["parts"]):
        kind, text = (view_parts[i] if i < len(view_parts) else ["part", None])[:2]
        out.append({"kind": kind, "text": text, "logodds": lo,
                    "passes": None if lo is None else clears(lo, threshold)})
    return out


def _answer(row: dict[str, Any]) -> dict[str, Any]:
    g = row["meta"]["gate"]
    return {"write_id": row["write_id"], "conversation_id": row["conversation_id"], "decision": g["decision"],
            "admit": g["decision"] == "admit", "score": g["score"], "threshold": g["threshold"], "view": g["view"],
            "evidence": g["evidence"], "failed": [p for p in g["parts"] if p["passes"] is not True],
            "parts": g["parts"], "passages": g["passages"], "replayed": False}


# ---------------------------------------------------------------- HTTP


def _reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    return Response(json_dumps(obj), status, headers, media_type="application/json")


async def _body_of(request: Any, max_body: int) -> dict[str, Any]:
    """The request's JSON object, read no further than `max_body` bytes whatever its headers say."""
    size = request.headers.get("content-length")
    if size and size.isdigit() and int(size) > max_body:
        raise ServeError(413, f"the request body is {size} bytes, over the gate's limit of "
                         f"{max_body} (--max-body)", None, "too_large")
    chunks, n = [], 0
    async for chunk in request.stream():
        n += len(chunk)
        if n > max_body:
            raise ServeError(413, f"the request body is over the gate's limit of {max_body} bytes "
                             "(--max-body)", None, "too_large")
        chunks.append(chunk)
    body, problem = parse_object(b"".join(chunks), "request body")
    if problem is not None:  # the decision log's own rules: what is logged, a restart can read
        if problem.code in ("invalid_json", "truncated_line", "utf8"):
            raise ServeError(400, f"the body is not JSON: {problem.message}", None, "bad_json")
        raise ServeError(422, problem.message, problem.field, problem.code)
    assert body is not None
    _normalise(body)
    return body


def _normalise(body: dict[str, Any]) -> None:
    """Ids in NFC at the door, as the log reader reads them: NFC-equal ids name one turn or write."""
    normalise_ids(body, "request")
    for t in body.get("turns") if isinstance(body.get("turns"), list) else ():
        if isinstance(t, dict):
            normalise_ids(t, "turn")
    if isinstance(body.get("write"), dict):
        normalise_ids(body["write"], "write")


class _Service:
    """The gate's HTTP side: one judge thread behind a bounded queue, a deadline per request, a
    bearer token, and every fault answered as a JSON error (never a traceback page)."""

    def __init__(self, gate: Gate, token: str | None) -> None:
        self.gate, self.token = gate, token
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="derivaudit-judge")
        self.waiting, self.served, self.seconds, self.started = 0, 0, 0.0, time.time()

    def authorised(self, request: Any) -> bool:
        if self.token is None:
            return True
        scheme, _, got = request.headers.get("authorization", "").partition(" ")
        # the header's bytes as sent (Starlette reads headers as latin-1) against the token's UTF-8
        return scheme.lower() == "bearer" and hmac.compare_digest(got.strip().encode("latin-1"),
                                                                  self.token.encode("utf-8"))

    def _refuse_when_busy(self) -> None:
        limits = self.gate.limits
        if self.waiting > limits.queue:
            mean = self.seconds / self.served if self.served else 1.0
            wait = max(1, math.ceil(mean * self.waiting))
            raise ServeError(503, f"the gate is busy ({self.waiting} requests waiting for the judge, limit "
                             f"{limits.queue}): retry after {wait} s", None, "busy", {"Retry-After": str(wait)})

    async def judged(self, call: Callable[..., dict[str, Any]], body: dict[str, Any], with_start: bool) -> Any:
        """`call(body)` on the judge thread within the deadline; with_start, the call is told through
        `start()` whether the request was given up before its work began."""
        self._refuse_when_busy()
        gave_up = threading.Event()
        began = threading.Event()

        def start() -> bool:
            if gave_up.is_set():
                return False
            began.set()
            return True

        def job() -> dict[str, Any]:
            t0 = time.perf_counter()
            try:
                return call(body, start) if with_start else call(body)
            finally:
                self.seconds += time.perf_counter() - t0
                self.served += 1

        self.waiting += 1
        try:
            fut = asyncio.wrap_future(self.pool.submit(job))
            try:
                res = await asyncio.wait_for(asyncio.shield(fut), self.gate.limits.timeout)
            except TimeoutError:
                gave_up.set()
                what = ("its work had begun and goes on: retry with the same write_id for its decision"
                        if began.is_set() else "it was not judged")
                raise ServeError(504, f"no answer within {self.gate.limits.timeout:g} s (--timeout); {what}", None,
                                 "timeout") from None
        finally:
            self.waiting -= 1
        return _reply(res)

    def guarded(self, handler: Callable[[Any], Any], auth: bool = True) -> Callable[[Any], Any]:
        async def endpoint(request: Any) -> Any:
            if auth and not self.authorised(request):
                return _reply({"error": {"code": "unauthorised", "message": "a valid bearer token is required "
                                         "(Authorization: Bearer ...)", "field": None}}, 401,
                              {"WWW-Authenticate": "Bearer"})
            try:
                return await handler(request)
            except ServeError as e:
                return _reply(e.to_dict(), e.status, e.headers)
            except Exception as e:  # a fault of the judge or of the gate: named, never a traceback page
                return _reply({"error": {"code": "internal", "message": f"{type(e).__name__}: {e}", "field": None}},
                              500)
        return endpoint

    async def health(self, request: Any) -> Any:
        return _reply({"status": "ok", "waiting": self.waiting, "served": self.served,
                       "uptime_s": round(time.time() - self.started, 1)})

    async def config(self, request: Any) -> Any:
        return _reply(self.gate.config())

    async def turns(self, request: Any) -> Any:
        return await self.judged(self.gate.add_turns, await _body_of(request, self.gate.limits.max_body), True)

    async def admit(self, request: Any) -> Any:
        return await self.judged(self.gate.admit, await _body_of(request, self.gate.limits.max_body), True)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> Any:
        try:
            yield
        finally:  # the work begun is finished and logged before the log is closed
            self.pool.shutdown(wait=True)
            self.gate.log.close()


def create_app(gate: Gate, token: str | None = None) -> Any:
    """The Starlette app over `gate`: GET /health, GET /v1/config, POST /v1/turns, POST /v1/admit."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    svc = _Service(gate, token)
    return Starlette(routes=[
        Route("/health", svc.guarded(svc.health, auth=False), methods=["GET"]),
        Route("/v1/config", svc.guarded(svc.config), methods=["GET"]),
        Route("/v1/turns", svc.guarded(svc.turns), methods=["POST"]),
        Route("/v1/admit", svc.guarded(svc.admit), methods=["POST"]),
    ], lifespan=svc.lifespan)


def uvicorn_config(app: Any, **kw: Any) -> Any:
    """uvicorn's config for the gate: its HTTP protocol with TCP_NODELAY on every connection.
    Without it a kept-alive connection waits ~40 ms per answer (uvicorn writes the head and the body
    in two sends; Nagle holds the second for the client's delayed ACK): measured 44 ms -> 0.3 ms
    per /health on loopback."""
    import socket

    import uvicorn

    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # httptools is optional in uvicorn
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base

    class NoDelay(Base):  # type: ignore[misc,valid-type]
        def connection_made(self, transport: Any) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().connection_made(transport)

    return uvicorn.Config(app, http=NoDelay, log_level="warning", access_log=False, **kw)


def loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
