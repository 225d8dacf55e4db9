"""Answer replay: what each serving method's context does to the answer (Memory Echo §4.2, §5.1;
MemTrim §2, §4).

For every read that logs a query and an expected answer, the generator answers from each method's
context, drawn from the same frozen pool (the read's logged ranking) with the same budget of `k`
records, greedy:
- `none`: no memory (the reference for ΔAccuracy and the flips);
- `budget`: the logged ranking cut to `k` records, as the memory system served it (the baseline);
- `fpa`: what FPA serves (`fpa.py`), verified corrections marked and preferred; its raw answer is
  then checked against the admitted authority, and where the judge finds it inconsistent the
  answer is regenerated from the authority alone (`fpa_raw` keeps the raw answer, `fpa` the
  constrained one, as the paper keeps both);
- `memtrim`: the evidence units MemTrim passes on (`memtrim.py`), from a trie built at write time.

The answer judge then reads, without the context (the paper's judge never sees the echo):
- accuracy: a 0–4 grade against the verified (expected) answer; a grade of 3 or more counts as
  accurate, read as the judge's probability of 3 or 4 against 0, 1 or 2 (`grade` keeps its most
  likely digit);
- old-answer adoption, a separate yes/no judgment, where the read has a historical claim: the
  read's `meta.historical`, else the superseded record of a correction in force whose old records
  are in the pool, else the top memory's stored outcome (`meta.evidence.outcome`) when it differs
  from the expected answer (MemTrim's TD-Dup);
- DCE, the Decision Contamination Effect, "an answer's extra alignment with the historical claim"
  (§4.2), which the paper names without a formula. Ours is the effect form of that sentence:

      DCE(method) = mean over reads with a historical claim h of [adopt(answer_method, h) − adopt(answer_control, h)]

  where the control answer comes from the same context with every record carrying h removed
  (refilled from the pool to `k`): the alignment the historical records add beyond what the rest
  of the context gives. It is 1 for a read whose answer takes the old claim only because the old
  records are there (the paper's case catalogue: "Correctness 0.000; DCE 1.000"), 0 when the old
  records change nothing, and negative when their presence moves the answer away from h.

Paired over the same reads, with intervals (`intervals.py`). Reads without an expected answer are
skipped with a count; an empty or whitespace answer is a scoring error, counted per method and
left out of that method's judged reads (paired comparisons use reads judged under both).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import templates
from ..log.records import MemoryLog, Read, Write, lineage_families
from ..models.base import Backend, Prompt, usage_report
from ..progress import in_parts
from . import bands, memtrim
from .fpa import K, served_by_fpa
from .intervals import mean_interval, wilson
from .provenance import corrections, in_force, read_points

METHODS = ("none", "budget", "fpa", "memtrim")
ECHO_METHODS = ("none", "budget", "fpa")
OVERLAP_METHODS = ("none", "budget", "memtrim")
MAX_ANSWER_TOKENS = 48
DIGITS = ("0", "1", "2", "3", "4")


@dataclass
class Judged:
    answer: str
    accurate: bool | None = None
    grade: int | None = None
    logodds: float | None = None  # the judge's log-odds of a grade of 3 or 4
    adopted: bool | None = None
    adoption_logodds: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ReadAnswers:
    read: Read
    historical: str | None
    carriers: frozenset[str]  # the records that carry the historical claim
    contexts: dict[str, list[str]] = field(default_factory=dict)  # method -> record ids (or units for memtrim)
    judged: dict[str, Judged] = field(default_factory=dict)
    authority: list[str] = field(default_factory=list)
    authority_consistent: bool | None = None
    memtrim: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"read_id": self.read.read_id, "conversation_id": self.read.conversation_id,
                "query": self.read.query, "expected": self.read.expected, "historical": self.historical,
                "contexts": self.contexts, "answers": {m: j.to_dict() for m, j in self.judged.items()},
                "authority": self.authority, "authority_consistent": self.authority_consistent,
                "memtrim": self.memtrim}


def _outcome(w: Write) -> str | None:
    out = memtrim.evidence_of(w.meta).get("outcome")
    return out if isinstance(out, str) and out.strip() else None


def historical_claims(log: MemoryLog) -> dict[str, tuple[str, frozenset[str]]]:
    """read id -> (the historical claim, the records carrying it), for the reads that have one."""
    from .overlap import correct

    fam = lineage_families(log.writes)
    by_id = {w.write_id: w for w in log.writes}
    cors = corrections(log, fam)
    point = read_points(log)
    order = {w.write_id: i for i, w in enumerate(log.writes)}
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for r in log.reads:
        given = (r.meta or {}).get("historical")
        pool = set(r.retrieved)
        forced = [c for c in in_force(cors, r, point[r.read_id]) if c.old & pool]
        if isinstance(given, str) and given.strip():
            carriers = frozenset().union(*(c.old for c in forced)) if forced else frozenset()
            out[r.read_id] = (given.strip(), carriers)
        elif forced:
            c = max(forced, key=lambda c: c.point)
            first = by_id[c.write.parent_id] if c.write.parent_id in c.old else \
                by_id[min(c.old, key=order.__getitem__)]
            out[r.read_id] = (first.text, c.old)
        elif r.retrieved and (stored := _outcome(by_id[r.retrieved[0]])) and r.expected is not None \
                and not correct(stored, r.expected):
            out[r.read_id] = (stored, frozenset(i for i in r.retrieved if _outcome(by_id[i]) == stored))
    return out


def _memories(ws: Sequence[Write], verified: bool = False, header: str = "Memories:") -> str:
    if not ws:
        return f"{header} (none)".strip()
    lines = [header] if header else []
    for i, w in enumerate(ws, 1):
        mark = "[verified current] " if verified and w.verified_correction else ""
        when = f"({w.time}) " if w.time else ""
        lines.append(f"[{i}] {mark}{when}{templates.line(w.text)}")
    return "\n".join(lines)


def _units(units: Sequence[Sequence[str]]) -> str:
    if not units:
        return "Memory evidence: (none)"
    return "Memory evidence:\n" + "\n".join(f"- {templates.line(k)}: {templates.line(v)}" for k, v in units)


def _grade(score: Any) -> int | None:
    for tok, _ in score.top:
        t = tok.strip()
        if t in DIGITS:
            return int(t)
    return None


class AnswerReplay:
    """One answer replay over a log: contexts, answers, judgments, metrics."""

    def __init__(self, log: MemoryLog, generator: Backend, judge: Backend, *, k: int = K,
                 methods: Sequence[str] = METHODS, band: tuple[float, float] = (0.2, 0.6),
                 index: memtrim.EvidenceIndex | None = None, parser: Backend | None = None):
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown answer method(s) {', '.join(unknown)} (known: {', '.join(METHODS)})")
        self.log, self.generator, self.judge, self.k = log, generator, judge, k
        self.methods = tuple(m for m in METHODS if m in methods)
        self.band = band
        self.by_id = {w.write_id: w for w in log.writes}
        self.parser = memtrim.Parser(parser or generator, index=index) if "memtrim" in self.methods else None
        self.timing: dict[str, float] = {}

    # ------------------------------------------------------------ contexts

    def _conflicts(self) -> Any:
        """Which old records conflict with a correction: the judge's yes/no, asked once per pair."""
        fam = lineage_families(self.log.writes)
        pairs = [(self.by_id[i], c.write) for c in corrections(self.log, fam) for i in sorted(c.old)]
        if not pairs:
            return None
        prompts = [Prompt("", templates.render("judge_conflict", correction=c.text, record=w.text)) for w, c in pairs]
        said = {(w.write_id, c.write_id): s.ok and (s.logodds or 0) > 0
                for (w, c), s in zip(pairs, self.judge.score(prompts), strict=True)}
        return lambda w, c: said.get((w.write_id, c.write_id), True)

    def _memtrim(self, reads: Sequence[Read]) -> dict[str, memtrim.Trimmed]:
        """The trie built in write order over the memories the reads retrieve (a memory no read
        retrieves is never matched), then each query parsed and trimmed against it."""
        assert self.parser is not None
        needed = {i for r in reads for i in r.retrieved[:self.k]}
        todo = [w for w in self.log.writes if w.write_id in needed and w.write_id not in self.parser.index.memories]
        ask = []
        for w in todo:
            given = memtrim.Structured.from_meta(w.write_id, w.meta, w.time)
            if given is not None:
                self.parser.index.add(given)
            else:
                ask.append((w.write_id, w.text, w.time))
        self.parser.parse(ask)  # canonicalised in write order: a key's form depends on the keys before it
        queries: list[memtrim.Structured | None] = [memtrim.Structured.from_meta(r.read_id, r.meta, r.time)
                                                    for r in reads]
        ask = [i for i, q in enumerate(queries) if q is None]
        parsed = self.parser.parse([(reads[i].read_id, reads[i].query, reads[i].time) for i in ask], query=True) \
            if ask else []
        for i, q in zip(ask, parsed, strict=True):
            queries[i] = q
        out = {}
        for r, q in zip(reads, queries, strict=True):
            assert q is not None
            ms = [self.parser.index.memories[i] for i in r.retrieved[:self.k] if i in self.parser.index.memories]
            out[r.read_id] = memtrim.trim(q, ms, self.parser.index)
        return out

    # ------------------------------------------------------------ the run

    def run(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        reads = [r for r in self.log.reads if r.expected is not None and r.expected.strip()]
        skipped = len(self.log.reads) - len(reads)
        hist = historical_claims(self.log)
        fpa = served_by_fpa(self.log, k=self.k, conflicts=self._conflicts()) if "fpa" in self.methods else {}
        trimmed = self._memtrim(reads) if "memtrim" in self.methods else {}
        self.timing["contexts_s"] = time.perf_counter() - t0
        rows = []
        gen: list[tuple[ReadAnswers, str, Prompt]] = []
        for r in reads:
            h = hist.get(r.read_id)
            ra = ReadAnswers(r, h[0] if h else None, h[1] if h else frozenset())
            budget = [self.by_id[i] for i in r.retrieved[:self.k]]
            ctx: dict[str, tuple[list[str], str]] = {}
            if "none" in self.methods:
                ctx["none"] = ([], templates.render("answer_none", question=r.query))
            if "budget" in self.methods:
                ctx["budget"] = ([w.write_id for w in budget],
                                 templates.render("answer", memories=_memories(budget), question=r.query))
            if "fpa" in self.methods:
                served = fpa[r.read_id]
                ra.authority = [w.write_id for w in served if w.verified_correction]
                ctx["fpa_raw"] = ([w.write_id for w in served],
                                  templates.render("answer_fpa", memories=_memories(served, True), question=r.query))
            if "memtrim" in self.methods:
                t = trimmed[r.read_id]
                ra.memtrim = t.to_dict()
                units = [[u.key, u.value] for u in t.context]
                ctx["memtrim"] = ([f"{k}: {v}" for k, v in units],
                                  templates.render("answer", memories=_units(units), question=r.query))
            if ra.historical is not None and ra.carriers:
                control = [self.by_id[i] for i in r.retrieved if i not in ra.carriers][:self.k]
                ctx["control"] = ([w.write_id for w in control],
                                  templates.render("answer", memories=_memories(control), question=r.query))
            for m, (ids, text) in ctx.items():
                ra.contexts[m] = ids
                gen.append((ra, m, Prompt("", text)))
            rows.append(ra)
        t1 = time.perf_counter()
        answers = in_parts("answering", [p for _, _, p in gen], lambda ps: self.generator.generate(
            ps, max_new_tokens=MAX_ANSWER_TOKENS, stop=("\n",)))
        self.timing["generate_s"] = time.perf_counter() - t1
        for (ra, m, _), a in zip(gen, answers, strict=True):
            ra.judged[m] = Judged(a.strip(), error=None if a.strip() else "empty answer")
        t2 = time.perf_counter()
        self._authority(rows)
        self._judge(rows)
        self.timing["judge_s"] = time.perf_counter() - t2
        self.timing["total_s"] = time.perf_counter() - t0
        return self._summary(rows, skipped)

    def _authority(self, rows: Sequence[ReadAnswers]) -> None:
        """FPA's final check: a raw answer the admitted authority contradicts (the judge's yes/no) is
        answered again from the authority alone; an answer it does not bear on, or no authority
        served, stands. (Asked as consistency instead, an answer about something else than the
        correction — the marathon, not the snack — fails the check and is lost.)"""
        if "fpa" not in self.methods:
            return
        check = [ra for ra in rows if ra.authority and not ra.judged["fpa_raw"].error]
        prompts = [Prompt("", templates.render(
            "judge_authority", authority=" ".join(self.by_id[i].text for i in ra.authority),
            question=ra.read.query, answer=ra.judged["fpa_raw"].answer)) for ra in check]
        redo = []
        for ra, s in zip(check, self.judge.score(prompts) if prompts else [], strict=True):
            ra.authority_consistent = not (s.ok and (s.logodds or 0) > 0)
            if not ra.authority_consistent:
                redo.append(ra)
        again = self.generator.generate([Prompt("", templates.render(
            "answer_authority", memories=_memories([self.by_id[i] for i in ra.authority], header=""),
            question=ra.read.query))
            for ra in redo], max_new_tokens=MAX_ANSWER_TOKENS, stop=("\n",)) if redo else []
        constrained = {ra.read.read_id: a.strip() for ra, a in zip(redo, again, strict=True)}
        for ra in rows:
            raw = ra.judged["fpa_raw"]
            ans = constrained.get(ra.read.read_id, raw.answer)
            ra.judged["fpa"] = Judged(ans, error=None if ans else "empty answer")
            ra.contexts["fpa"] = ra.authority if ra.read.read_id in constrained else ra.contexts["fpa_raw"]

    def _judge(self, rows: Sequence[ReadAnswers]) -> None:
        acc: list[tuple[Judged, Prompt]] = []
        adopt: list[tuple[Judged, Prompt]] = []
        for ra in rows:
            for j in ra.judged.values():
                if j.error:
                    continue
                acc.append((j, Prompt("", templates.render("judge_accuracy", question=ra.read.query,
                                                           expected=ra.read.expected or "", answer=j.answer),
                                      verdict=templates.verdict("judge_accuracy"))))
                if ra.historical is not None:
                    adopt.append((j, Prompt("", templates.render("judge_adoption", historical=ra.historical,
                                                                 question=ra.read.query, answer=j.answer))))
        for (j, _), s in zip(acc, in_parts("judging accuracy", [p for _, p in acc], self.judge.score), strict=True):
            if not s.ok:
                j.error = f"accuracy not read: {s.error}"
                continue
            j.logodds, j.grade, j.accurate = s.logodds, _grade(s), (s.logodds or 0) > 0
        for (j, _), s in zip(adopt, in_parts("judging adoption", [p for _, p in adopt], self.judge.score), strict=True):
            if s.ok:
                j.adoption_logodds, j.adopted = s.logodds, (s.logodds or 0) > 0

    # ------------------------------------------------------------ metrics

    def _summary(self, rows: Sequence[ReadAnswers], skipped: int) -> dict[str, Any]:
        shown = [m for m in ("none", "budget", "fpa_raw", "fpa", "memtrim") if any(m in ra.judged for ra in rows)]
        per: dict[str, dict[str, Any]] = {}
        for m in shown:
            js = [ra.judged[m] for ra in rows if m in ra.judged]
            ok = [j for j in js if j.accurate is not None]
            hits = sum(bool(j.accurate) for j in ok)
            d: dict[str, Any] = {"reads": len(ok), "errors": sum(j.error is not None for j in js),
                                 "accuracy": hits / len(ok) if ok else None, "accuracy_ci": list(wilson(hits, len(ok)))}
            for ref in ("none", "budget"):
                if ref == m or ref not in shown or m == "none":
                    continue
                pairs = [(ra.judged[ref].accurate, ra.judged[m].accurate) for ra in rows
                         if m in ra.judged and ref in ra.judged and ra.judged[ref].accurate is not None
                         and ra.judged[m].accurate is not None]
                diffs = [int(b) - int(a) for a, b in pairs]
                d[f"delta_{ref}"] = sum(diffs) / len(diffs) if diffs else None
                d[f"delta_{ref}_ci"] = list(mean_interval(diffs))
                d[f"right_to_wrong_{ref}"] = sum(a and not b for a, b in pairs)  # ✓→✗
                d[f"wrong_to_right_{ref}"] = sum(b and not a for a, b in pairs)  # ✗→✓
            with_h = [ra for ra in rows if ra.historical is not None and m in ra.judged
                      and ra.judged[m].adopted is not None]
            d["historical_reads"] = len(with_h)
            d["adoption"] = sum(bool(ra.judged[m].adopted) for ra in with_h) / len(with_h) if with_h else None
            dce = [int(bool(ra.judged[m].adopted)) - int(bool(ra.judged["control"].adopted)) for ra in with_h
                   if m != "none" and "control" in ra.judged and ra.judged["control"].adopted is not None]
            d["dce"] = sum(dce) / len(dce) if dce else None
            d["dce_ci"] = list(mean_interval(dce))
            d["dce_reads"] = len(dce)
            per[m] = d
        out: dict[str, Any] = {
            "settings": {"k": self.k, "methods": shown, "accurate": "judge's p(grade 3 or 4) > p(grade 0-2)",
                         "dce": "mean of adopt(method) - adopt(control: the context without the records "
                                "carrying the historical claim), over reads with one",
                         "intervals": "Wilson (accuracy); percentile bootstrap over reads, 2000 resamples (paired)"},
            "reads": len(rows), "skipped_no_expected": skipped, "methods": per,
            "rows": [ra.to_dict() for ra in rows],
            "cost": {**{k: round(v, 3) for k, v in self.timing.items()},
                     "per_read_s": round(self.timing["total_s"] / len(rows), 3) if rows else None,
                     "generator": usage_report(self.generator), "judge": usage_report(self.judge)},
        }
        if self.parser is not None:
            out["memtrim"] = {"parse": self.parser.counts.to_dict(), "index": self.parser.index.to_dict()}
            out["overlap"] = self._overlap(rows)
        return out

    def _overlap(self, rows: Sequence[ReadAnswers]) -> dict[str, Any]:
        """The memory effect by overlap band, with and without MemTrim (against no memory)."""
        from .overlap import memory_overlap

        res: dict[str, Any] = {"band": list(self.band)}
        for m in ("budget", "memtrim"):
            keep = [ra for ra in rows if ra.read.retrieved and m in ra.judged and "none" in ra.judged
                    and ra.judged[m].accurate is not None and ra.judged["none"].accurate is not None]
            xs = [memory_overlap(ra.read.query, self.by_id[ra.read.retrieved[0]]) for ra in keep]
            res[m] = bands.peak_test(xs, [bool(ra.judged[m].accurate) for ra in keep],
                                     [bool(ra.judged["none"].accurate) for ra in keep], self.band)
        return res


def replay_answers(log: MemoryLog, generator: Backend, judge: Backend, **kw: Any) -> dict[str, Any]:
    """The answer replay of `log` (see the module docstring); `kw`: k, methods, band, index, parser."""
    return AnswerReplay(log, generator, judge, **kw).run()


def answer_metrics(name: str, res: Mapping[str, Any]) -> dict[str, float | None]:
    """The replay's headline numbers as gateable metrics: `NAME.answers.{accuracy,delta_none,adoption,dce,
    errors}.METHOD`."""
    out: dict[str, float | None] = {f"{name}.answers.reads": float(res["reads"]),
                                    f"{name}.answers.skipped": float(res["skipped_no_expected"])}
    for m, d in res["methods"].items():
        for key in ("accuracy", "delta_none", "adoption", "dce", "errors"):
            if key in d:
                v = d[key]
                out[f"{name}.answers.{key}.{m}"] = None if v is None else float(v)
    return out
