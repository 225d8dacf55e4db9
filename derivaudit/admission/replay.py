"""Admission replay (DerivAudit, §3.2–3.3, §4.1, App. F, G, J): keep the memory, the evidence and the
verifier fixed, change only the view, and count what a write-time verifier would admit.

One answer key for every setting, as in the paper (§4.1: the same negatives at every setting):
`scan`'s expanded-view reference label, whatever evidence the replayed setting shows the verifier.
Valid = supported; negatives = unsupported or contradicted; ambiguous and unresolved writes are
excluded and counted. So a provenance-repaired memory is a valid memory in citation_only too (a
verifier that rejects it there loses a valid memory), and paired differences compare the same
memories. Operating points: `argmax` (admit when log-odds > 0), `crossfit` (per held-out
conversation, the lowest threshold whose conversation-balanced false-positive rate on the other
conversations is at most 0.10), `auto` (argmax for a near-binary verifier, else crossfit: decided
once per verifier, from the scores of all its settings together).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import templates
from ..audit.labels import answers
from ..models.base import Backend, Prompt, Score, usage_report
from ..rates.stats import auc, balanced_interval, paired_interval
from ..runs import folder as runs
from .operating import decide, held_out_threshold, resolve_point
from .views import GATE_VIEW, Memory, View, evidence_block, get_view

CANONICAL = {
    "holistic/citation_only": ("holistic", "citation_only"),
    "holistic/expanded": ("holistic", "expanded"),
    "obligation/expanded": ("obligation", "expanded"),
}
COMBINE = ("min", "mean", "noisy_and")
POINTS = ("auto", "argmax", "crossfit")


# ---------------------------------------------------------------- combining split views


def combine(scores: Sequence[float], rule: str = "min") -> float:
    """One log-odds from the parts of a split view. min: the record passes only if every part does;
    mean: the average log-odds; noisy_and: the log-odds of all parts being yes, treating each part's
    p(yes) as independent."""
    if not scores:
        raise ValueError("no part scores to combine")
    if rule == "min":
        return min(scores)
    if rule == "mean":
        return sum(scores) / len(scores)
    if rule == "noisy_and":
        log_p = sum(-math.log1p(math.exp(-s)) if s > -30 else s for s in scores)  # sum of log sigmoid
        if log_p >= 0:
            return math.inf
        return log_p - math.log(-math.expm1(log_p))
    raise ValueError(f"unknown combining rule {rule!r} (use {', '.join(COMBINE)})")


# ---------------------------------------------------------------- metrics


def _balanced(rows: Sequence[dict[str, Any]], truth: bool) -> float | None:
    per: dict[str, list[bool]] = {}
    for r in rows:
        if r["truth"] is truth and r["decision"] is not None:
            per.setdefault(r["conversation_id"], []).append(r["decision"])
    rates = [sum(v) / len(v) for v in per.values() if v]
    return sum(rates) / len(rates) if rates else None


def _per_conversation(rows: Sequence[dict[str, Any]], truth: bool) -> dict[str, list[int]]:
    """conversation -> [admitted, decided] over the rows with this truth and a decision."""
    out: dict[str, list[int]] = {}
    for r in rows:
        if r["truth"] is truth and r["decision"] is not None:
            c = out.setdefault(r["conversation_id"], [0, 0])
            c[0] += bool(r["decision"])
            c[1] += 1
    return out


def rate_interval(rows: Sequence[dict[str, Any]], truth: bool) -> tuple[float | None, float | None]:
    """95% interval of a balanced admission rate for conversations like these (stats.balanced_interval)."""
    per = _per_conversation(rows, truth)
    return balanced_interval([h for h, _ in per.values()], [n for _, n in per.values()])


def setting_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r["truth"] is not None]
    pos = [r["score"] for r in scored if r["truth"] and r["score"] is not None]
    neg = [r["score"] for r in scored if r["truth"] is False and r["score"] is not None]
    kept = _balanced(scored, True)
    admitted = _balanced(scored, False)
    repaired = [r for r in rows if r.get("repaired") and r["decision"] is not None]
    thresholds = sorted({r["threshold"] for r in scored if r["threshold"] is not None})
    return {
        "valid_kept": kept, "valid_kept_ci": rate_interval(scored, True),
        "unsupported_admitted": admitted,
        "unsupported_admitted_ci": rate_interval(scored, False),
        "realised_fpr": admitted, "n_pos": len(pos), "n_neg": len(neg),
        "excluded": {k: sum(r["excluded"] == k for r in rows) for k in dict.fromkeys(
            ["ambiguous", "unresolved", *(r["excluded"] for r in rows if r["excluded"])])},
        "scoring_errors": sum(r["score"] is None and r["truth"] is not None for r in rows),
        "bounded_scores": sum(r.get("bounded", 0) for r in rows if r["truth"] is not None),
        "auc": auc(pos, neg),
        "repaired_kept": sum(r["decision"] for r in repaired), "repaired": len(repaired),
        "thresholds": [t if math.isfinite(t) else str(t) for t in thresholds][:20],
    }


def paired_difference(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], truth: bool) -> dict[str, Any]:
    """Difference (b - a) of a balanced admission rate between two settings on the same writes
    (those with this truth and a decision in both), with a 95% interval for conversations like
    these (stats.paired_interval: a t interval over the conversations' differences)."""
    def ok(rows: Sequence[dict[str, Any]]) -> set[str]:
        return {r["write_id"] for r in rows if r["truth"] is truth and r["decision"] is not None}

    key = ok(a) & ok(b)
    ra = [r for r in a if r["write_id"] in key]
    rb = [r for r in b if r["write_id"] in key]
    va, vb = _balanced(ra, truth), _balanced(rb, truth)
    d = None if va is None or vb is None else vb - va
    ci: tuple[float | None, float | None] = (None, None)
    if d is not None:
        da = {r["write_id"]: bool(r["decision"]) for r in ra}
        per: dict[str, list[int]] = {}
        for r in rb:
            c = per.setdefault(r["conversation_id"], [0, 0, 0])  # sum of (b - a), pairs, discordant
            diff = bool(r["decision"]) - da[r["write_id"]]
            c[0] += diff
            c[1] += 1
            c[2] += diff != 0
        ci = paired_interval([s / n for s, n, _ in per.values()], [n for _, n, _ in per.values()],
                             [k for _, _, k in per.values()])
    return {"difference": d, "ci": ci, "n": len(key)}


# ---------------------------------------------------------------- scoring the memories


@dataclass
class Case:
    """One memory in one evidence view, with its ground truth."""

    write_id: str
    conversation_id: str
    record: str
    evidence: str  # citation_only | expanded
    passages: Sequence[dict[str, Any]]
    memory: Memory
    truth: bool | None  # True valid, False unsupported/contradicted, None excluded
    excluded: str | None = None
    repaired: bool = False


def qa_pairs(backend: Backend, records: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Who-did-what questions with the record's answers, generated once per record."""
    head = templates.load("qa_questions")
    gens = backend.generate([Prompt(head, templates.render("qa_record", record=" ".join(r.split())))
                             for r in records], max_new_tokens=96, stop=("\n\n", "\nRecord:"))
    out = []
    for text in gens:
        pairs = []
        for line in text.splitlines():
            q, sep, a = line.partition("->")
            if sep and q.strip().endswith("?") and a.strip():
                pairs.append((q.strip(), a.strip()))
        out.append(list(dict.fromkeys(pairs))[:8])
    return out


def score_settings(backend: Backend, jobs: Sequence[tuple[View, Sequence[Case]]], rule: str = "min",
                   details: bool = False) -> list[list[tuple[Any, ...]]]:
    """Score several (view, cases) jobs in one backend call, so every view of one write shares the
    write's evidence prefix (computed once instead of once per view). Per case: (combined log-odds
    or None on a scoring error, per-part log-odds), plus the parts' Score objects with `details`."""
    prompts: list[Prompt] = []
    owner: list[tuple[int, int]] = []
    for j, (view, cases) in enumerate(jobs):
        for i, c in enumerate(cases):
            ps = view.prompts(evidence_block(c.record, c.passages), c.memory)
            prompts.extend(ps)
            owner.extend([(j, i)] * len(ps))
    scores: list[Score] = backend.score(prompts)
    parts: list[list[list[Score]]] = [[[] for _ in cases] for _, cases in jobs]
    for (j, i), s in zip(owner, scores, strict=True):
        parts[j][i].append(s)
    out = []
    for (view, _), job_parts in zip(jobs, parts, strict=True):
        res: list[tuple[Any, ...]] = []
        for sc in job_parts:
            ps = [s.logodds for s in sc]
            if any(p is None for p in ps) or not ps:
                combined = None
            else:
                combined = combine([p for p in ps if p is not None], rule if view.split else "min")
            res.append((combined, ps, sc) if details else (combined, ps))
        out.append(res)
    return out


def score_cases(backend: Backend, cases: Sequence[Case], view: View, rule: str = "min", details: bool = False
                ) -> list[tuple[Any, ...]]:
    """(combined log-odds or None on a scoring error, per-part log-odds[, Scores]) for each case."""
    return score_settings(backend, [(view, cases)], rule, details)[0]


def seeded_order(items: Sequence[Any], seed: str) -> list[Any]:
    rng = random.Random(hashlib.sha256(seed.encode()).digest())
    out = list(items)
    rng.shuffle(out)
    return out


def noise_lists(write_id: str, pool: Sequence[str], levels: Sequence[int] = (0, 2, 4)) -> dict[int, list[str]]:
    """Extra true obligations for the noise probe: one seeded order per write, so the 2-list is a
    prefix of the 4-list and only the number differs."""
    order = seeded_order(sorted(set(pool)), write_id)
    return {n: order[:n] for n in levels if n <= len(order)}


# ---------------------------------------------------------------- the replay of a run


def parse_settings(view: str | None = None, evidence: str = "expanded",
                   setting: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(view, evidence) pairs from `--view` (a name, a comma list or all), `--evidence` (expanded,
    citation_only or both) and `--setting` (canonical names or 'canonical'); without either, the three
    canonical settings. Raises ValueError naming what is wrong."""
    from .views import parse_views

    settings: list[tuple[str, str]] = []
    if view:
        names = parse_views(view)
        evs = ["citation_only", "expanded"] if evidence == "both" else [evidence]
        if any(e not in ("citation_only", "expanded") for e in evs):
            raise ValueError("--evidence must be expanded, citation_only or both")
        settings += [(v, e) for v in names for e in evs]
    for s in setting or ([] if view else ["canonical"]):
        if s == "canonical":
            settings += list(CANONICAL.values())
        elif s in CANONICAL:
            settings.append(CANONICAL[s])
        else:
            raise ValueError(f"unknown setting {s!r} (known: {', '.join(CANONICAL)}, canonical)")
    return list(dict.fromkeys(settings))


def parse_noise(text: str | None) -> list[int]:
    """Noise-probe levels from "0,2,4"."""
    if not text:
        return []
    try:
        levels = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise ValueError(f"--noise takes comma-separated integers, got {text!r}") from None
    if any(x < 0 for x in levels):
        raise ValueError("--noise levels must be >= 0")
    return levels


def check_options(rule: str, point: str, reference: str = "model", run: Any = None) -> None:
    if rule not in COMBINE:
        raise ValueError(f"--combine must be one of {', '.join(COMBINE)}")
    if point not in POINTS:
        raise ValueError(f"--point must be {', '.join(POINTS)}")
    if reference not in REFERENCES:
        raise ValueError(f"--reference must be {', '.join(REFERENCES)}")
    if run is not None and reference == "human" and not runs.read_rows_if(run, runs.REVIEW):
        raise ValueError(f"--reference human needs reviewers' answers in {runs.path(run, runs.REVIEW)}: "
                         f"`derivaudit review sample {run} -o review.csv`, fill it, `derivaudit review import`")
    if run is not None and reference == "gold" and not any(
            r.get("gold") for r in runs.read_rows_if(run, runs.LABELS)):
        raise ValueError(f"--reference gold: no write of {run} carries meta.gold")


REFERENCE = "expanded"  # the view whose labels are the answer key of every setting
REFERENCES = ("model", "human", "gold")


def reference_truth(label_row: dict[str, Any], reference: str = "model",
                    human: dict[str, str] | None = None) -> tuple[bool | None, str | None]:
    """(truth, why excluded) of a write under the answer key: its expanded-view label by the model
    (scan's reference labels), by the human reviewers (`review import`; a write counts once every
    one of its expanded obligations was reviewed), or `meta.gold` from the log."""
    if reference == "gold":
        g = label_row.get("gold")
        if g is None:
            return None, "no gold"
        if g == "ambiguous":
            return None, "ambiguous"
        return g in ("citation-supported", "provenance-repaired"), None
    if reference == "human":
        label = (human or {}).get(label_row["write_id"])
        if label is None:
            return None, "not reviewed"
    else:
        label = label_row["expanded_label"]
        if label_row["unresolved"]:
            return None, "unresolved"
    if label == "ambiguous" or label is None:
        return None, "ambiguous"
    return label == "supported", None


def load_cases(run: Any, evidence: str, reference: str = "model") -> list[Case]:
    """Cases for one evidence view from a scan run folder (labels, views, obligations): the
    passages of that view, the truth of the answer key (the expanded view's label by `reference`)."""
    labels = runs.read_rows(run, runs.LABELS)
    views = {r["write_id"]: r for r in runs.read_rows(run, runs.VIEWS)}
    obls = {r["write_id"]: [(o["kind"], o["text"]) for o in r["obligations"]]
            for r in runs.read_rows(run, runs.OBLIGATIONS)}
    human = None
    if reference == "human":
        from ..review.obligations import human_write_labels

        human = human_write_labels(run, REFERENCE)
    cases = []
    for r in labels:
        truth, excluded = reference_truth(r, reference, human)
        cases.append(Case(r["write_id"], r["conversation_id"], r["text"], evidence, views[r["write_id"]][evidence],
                          Memory(r["text"], obls.get(r["write_id"], [])), truth, excluded, r["provenance_repaired"]))
    return cases


def _with_qa(cases: list[Case], qa: dict[str, list[tuple[str, str]]]) -> list[Case]:
    return [Case(c.write_id, c.conversation_id, c.record, c.evidence, c.passages,
                 Memory(c.record, c.memory.obligations, qa.get(c.write_id, [])), c.truth, c.excluded, c.repaired)
            for c in cases]


def earlier_replays(run: Any, backend: Backend, fresh: bool = False) -> tuple[dict[str, list[dict[str, Any]]],
                                                                              dict[str, Any]]:
    """The rows of the settings this run has replayed before, by setting, and its replay report
    ({} and {} with `fresh` or none). A replay by another verifier is refused (RunError): every
    setting of a run's replay is decided on one verifier, at one operating point, so that the
    paired differences compare views, not models."""
    if fresh or not runs.exists(run, runs.REPLAY):
        return {}, {}
    old = runs.read_json(run, runs.REPLAY)
    was, now = old.get("model"), backend.identity()
    if was is not None and was != now:
        raise runs.RunError(
            f"{runs.path(run, runs.REPLAY)} holds replays by {_model_name(was)}, and this verifier is "
            f"{_model_name(now)}: one run's replays share one verifier, so that their differences compare views. "
            "Pass --fresh to replace them, or replay a copy of the run folder")
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for r in runs.read_rows_if(run, runs.REPLAY_SCORES):
        rows_of.setdefault(r["setting"], []).append(r)
    return rows_of, old


def replayed_thresholds(run: Any, views: Sequence[str], backend: Backend,
                        evidence: str = "expanded") -> dict[str, dict[str, Any]]:
    """Per view, the operating point a run's replay decided that view at (its `evidence` setting),
    as a threshold for items held out from all of the run's conversations (operating.
    held_out_threshold): what built tests (families) are decided at, so that they are read as the
    replay reads the natural writes. The replay must be by this verifier (DerivAudit compares
    settings within one verifier) and hold every view (RunError, naming what is missing)."""
    runs.require(run, (runs.REPLAY, runs.REPLAY_SCORES), f"replay it first: `derivaudit replay {run}`")
    report = runs.read_json(run, runs.REPLAY)
    was, now = report.get("model"), backend.identity()
    if was != now:
        raise runs.RunError(f"{runs.path(run, runs.REPLAY)} was decided by {_model_name(was)}, and this verifier is "
                            f"{_model_name(now)}: an operating point holds for one verifier only")
    rows = runs.read_rows(run, runs.REPLAY_SCORES)
    out = {}
    for view in views:
        key = f"{view}/{evidence}"
        if key not in report.get("settings", {}):
            raise runs.RunError(f"{runs.path(run, runs.REPLAY)} has no {key} setting: "
                                f"`derivaudit replay {run} --view {view}` first")
        point = report["settings"][key]["operating_point"]
        threshold = held_out_threshold([r for r in rows if r["setting"] == key], point)
        out[view] = {"threshold": threshold, "operating_point": point, "setting": key, "run": str(run)}
    return out


def _model_name(identity: Any) -> str:
    return str(identity.get("model")) if isinstance(identity, dict) else str(identity)


def replay_inputs(run: Any) -> str:
    """What a replay's scores depend on in the run: every write's views and obligations."""
    return runs.fingerprint(runs.file_sha(run, runs.VIEWS), runs.file_sha(run, runs.OBLIGATIONS))


def _refreshed(rows: list[dict[str, Any]], cases: dict[str, Case], rule: str) -> list[dict[str, Any]]:
    """An earlier setting's rows under this replay's answer key and combine rule (their scores kept)."""
    split = get_view(rows[0]["view"]).split if rows else False
    out = []
    for r in rows:
        c = cases[r["write_id"]]
        parts = r.get("parts") or []
        score = r["score"]
        if split and parts and all(isinstance(p, int | float) for p in parts):
            score = combine(parts, rule)
        out.append({**r, "truth": c.truth, "excluded": c.excluded, "repaired": c.repaired, "score": score})
    return out


def replay(run: Any, backend: Backend, settings: Sequence[tuple[str, str]], *, rule: str = "min",
           point: str = "auto", noise: Sequence[int] = (), chunk: int = 16,
           reference: str = "model", fresh: bool = False,
           progress: Callable[[str, int, int], None] = lambda *_: None) -> dict[str, Any]:
    """Score every (view, evidence) setting, decide at the operating point, and report against the
    answer key `reference` (model, human or gold labels of the expanded view). The run's earlier
    replayed settings are kept (their scores, under this replay's answer key, combine rule and
    operating point); a setting replayed again replaces only itself; `fresh` drops them all."""
    from pathlib import Path

    run = Path(run)
    runs.require(run, (runs.LABELS, runs.VIEWS, runs.OBLIGATIONS), f"run `derivaudit scan ... -o {run}` first")
    check_options(rule, point, reference, run)
    earlier, old_report = earlier_replays(run, backend, fresh)
    inputs = replay_inputs(run)
    stale = bool(earlier) and old_report.get("inputs") != inputs  # the run was scanned again since
    by_evidence = {ev: load_cases(run, ev, reference) for ev in {ev for _, ev in settings}}
    qa: dict[str, list[tuple[str, str]]] = {}
    if any(get_view(v).needs_qa for v, _ in settings):
        records = next(iter(by_evidence.values()))
        for start in range(0, len(records), chunk):
            part = records[start : start + chunk]
            qa.update(zip([c.write_id for c in part], qa_pairs(backend, [c.record for c in part]), strict=True))
            progress("QA questions", len(part), len(records))
    all_rows: list[dict[str, Any]] = []
    report: dict[str, Any] = {"settings": {}, "operating_point": point, "combine": rule, "inputs": inputs,
                              "kept": [], "dropped": []}
    cases_of: dict[str, tuple[View, list[Case]]] = {}
    for view_name, ev in settings:
        view = get_view(view_name)
        cases_of[f"{view_name}/{ev}"] = (view, _with_qa(by_evidence[ev], qa) if view.needs_qa else by_evidence[ev])
    rows_of: dict[str, list[dict[str, Any]]] = {key: [] for key in cases_of}
    total = len(next(iter(by_evidence.values()))) if by_evidence else 0
    for start in range(0, total, chunk):
        jobs = [(view, cases[start : start + chunk]) for view, cases in cases_of.values()]
        scored_jobs = score_settings(backend, jobs, rule, details=True)
        for (key, (view, _)), (_, part), scored in zip(cases_of.items(), jobs, scored_jobs, strict=True):
            ev = key.split("/", 1)[1]
            for c, (score, parts, sc) in zip(part, scored, strict=True):
                rows_of[key].append({"setting": key, "view": view.name, "evidence": ev, "write_id": c.write_id,
                                     "conversation_id": c.conversation_id, "truth": c.truth,
                                     "excluded": c.excluded, "repaired": c.repaired, "score": score,
                                     "parts": parts, "bounded": sum(s.ok and s.bounded for s in sc)})
        progress("scoring", min(chunk, total - start), total)
    rows_of = _merged(run, earlier, rows_of, stale, by_evidence, reference, rule, report)
    used = resolve_point([r for rows in rows_of.values() for r in rows], point)  # one point per verifier
    report["operating_point_used"] = used
    report["reference"] = {"labels": reference, "view": REFERENCE,
                           "meaning": f"every setting is scored against the {reference} label of the expanded view"}
    for key, rows in rows_of.items():
        used = decide(rows, used)
        m = setting_metrics(rows)
        m["operating_point"] = used
        report["settings"][key] = m
        all_rows.extend(rows)
    report["differences"] = _differences(rows_of)
    if noise:
        report["noise"] = noise_probe(run, backend, rows_of, noise, rule,
                                      by_evidence.get("expanded") or load_cases(run, "expanded", reference))
        progress("noise probe", 1, 1)
    elif old_report.get("noise") and not report["dropped"] and old_report.get("combine") == rule \
            and old_report.get("reference", {}).get("labels") == reference:
        report["noise"] = old_report["noise"]  # made on these writes, with this answer key and rule
    report["model"] = backend.identity()
    report["usage"] = usage_report(backend)  # the verifier's work for this replay, kept with its results
    runs.write_rows(run, runs.REPLAY_SCORES, [{k: _finite(v) for k, v in r.items()} for r in all_rows])
    runs.write_json(run, runs.REPLAY, _finite(report))
    return _finite(report)


def _merged(run: Any, earlier: dict[str, list[dict[str, Any]]], rows_of: dict[str, list[dict[str, Any]]],
            stale: bool, by_evidence: dict[str, list[Case]], reference: str, rule: str,
            report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """This replay's settings with the earlier ones it does not replace (under its answer key and
    rule; none when the run was scanned again since: listed in `report["dropped"]`), in the order
    they were first replayed."""
    kept: dict[str, list[dict[str, Any]]] = {}
    for key, rows in earlier.items():
        if key in rows_of:
            continue
        if stale:
            report["dropped"].append(key)
            continue
        ev = key.split("/", 1)[1]
        if ev not in by_evidence:
            by_evidence[ev] = load_cases(run, ev, reference)
        kept[key] = _refreshed(rows, {c.write_id: c for c in by_evidence[ev]}, rule)
        report["kept"].append(key)
    return {**{k: kept.get(k, rows_of.get(k)) for k in earlier if k in kept or k in rows_of},
            **{k: v for k, v in rows_of.items() if k not in earlier}}


def _finite(x: Any) -> Any:
    """JSON has no infinities: write them as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def _differences(rows_of: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Paired differences along the canonical chain (more history, then a different check), and
    each other setting against holistic/expanded."""
    pairs = [("holistic/citation_only", "holistic/expanded"), ("holistic/expanded", "obligation/expanded")]
    pairs += [("holistic/expanded", k) for k in rows_of if k not in ("holistic/expanded", "obligation/expanded",
                                                                      "holistic/citation_only")]
    out = []
    for a, b in pairs:
        if a in rows_of and b in rows_of:
            for truth, metric in ((True, "valid_kept"), (False, "unsupported_admitted")):
                d = paired_difference(rows_of[a], rows_of[b], truth)
                out.append({"from": a, "to": b, "metric": metric, **d})
    return out


def noise_probe(run: Any, backend: Backend, rows_of: dict[str, list[dict[str, Any]]], levels: Sequence[int],
                rule: str = "min", expanded: Sequence[Case] | None = None) -> dict[str, Any]:
    """Accumulated verification noise (§3.3, Table 6): supported memories checked with the
    obligation view after adding 0, 2 or 4 extra true obligations; memory and evidence unchanged.
    An extra obligation must be supported by this memory's own expanded evidence (by the reference
    labels: supported in another write's expanded view, on a checked subset of passages that are all
    in this memory's expanded passages), so that rejecting the longer list is noise, not a correct
    catch. Every level is scored on the same memories (those with enough extras for the top level);
    how many could be probed at each level, and why the others could not, is reported."""
    cases = [c for c in (expanded if expanded is not None else load_cases(run, "expanded")) if c.truth]
    prims = runs.read_rows(run, runs.PRIMITIVES)
    texts = {o["obligation_id"]: o["text"] for r in runs.read_rows(run, runs.OBLIGATIONS) for o in r["obligations"]}
    supported_writes = {c.write_id for c in cases}
    # conversation -> (write_id, obligation text, the turns its checked subset names)
    pool: dict[str, list[tuple[str, str, frozenset[str]]]] = {}
    for p in prims:
        if p["view"] != "expanded" or p["label"] != "supported" or p["write_id"] not in supported_writes:
            continue
        final = answers(p)
        turns = frozenset(p["passages"][n - 1] for n in final.get("e_subset") or [] if 0 < n <= len(p["passages"]))
        if turns:
            pool.setdefault(p["conversation_id"], []).append((p["write_id"], texts[p["obligation_id"]], turns))
    top = max(levels)
    probe = []
    eligible = {n: 0 for n in levels}
    for c in cases:
        own = {t.get("turn_id") for t in c.passages}
        others = [t for w, t, turns in pool.get(c.conversation_id, []) if w != c.write_id and turns <= own]
        lists = noise_lists(c.write_id, others, levels)
        for n in lists:
            eligible[n] += 1
        if top in lists:
            probe.append((c, lists))
    view = get_view(GATE_VIEW)
    thresholds = {r["write_id"]: r["threshold"] for r in rows_of.get(f"{GATE_VIEW}/expanded", [])}
    out: dict[str, Any] = {
        "levels": {}, "writes": len(probe), "skipped_too_few_extras": len(cases) - len(probe),
        "candidates": len(cases),
        "eligible": {str(n): eligible[n] for n in levels},
        "why_not": {str(n): f"{len(cases) - eligible[n]} supported memories have fewer than {n} other supported "
                            "obligations whose implying passages are all in their own expanded evidence"
                    for n in levels if eligible[n] < len(cases)},
    }
    for n in levels:
        variants = [Case(c.write_id, c.conversation_id, c.record, c.evidence, c.passages,
                         Memory(c.record, [*c.memory.obligations, *[("fact", t) for t in lists[n]]]), c.truth)
                    for c, lists in probe]
        scored = score_cases(backend, variants, view, rule)
        ok = [(c, s) for c, (s, _) in zip(variants, scored, strict=True) if s is not None]
        vals = [s for _, s in ok]
        with_t = [(s, thresholds[c.write_id]) for c, s in ok if isinstance(thresholds.get(c.write_id), float)]
        out["levels"][str(n)] = {
            "mean_logodds": sum(vals) / len(vals) if vals else None,
            "admitted_argmax": sum(s > 0 for s in vals) / len(vals) if vals else None,
            "admitted_at_threshold": sum(s >= t for s, t in with_t) / len(with_t) if with_t else None,
            "scoring_errors": len(variants) - len(ok),
        }
    return out
