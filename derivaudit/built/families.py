"""Matched families (DerivAudit §3.2, App. E, Fig. 3b/3c): does a verifier accept compositions that
nothing supports when their premises are plausible?

A family is a pair of candidate memories over the same premises: the valid one asserts the relation
the evidence supports, the invalid one a relation nothing supports. `build` makes four cells,
{local, distributed} relation support × {valid, invalid} memory, over the same two distractor
passages and neutral padding turns from one real conversation up to a fixed number of passages,
plus two controls per evidence setting: the relation support removed (the valid memory should
flip to reject) and the premises swapped for irrelevant history at the same positions, each turn
within ±20% of the words of the passage it replaces (`length_matched`).
`run` scores every version with the chosen views and reports acceptance per cell, the valid-invalid
gap and the control outcomes.

Family file (JSONL, one family per line): family_id, valid, invalid (memory texts), premises (list
of {speaker, text}), relation {local: [one passage], distributed: [two or more passages]},
distractors (two passages), and optionally conversation (the padding conversation of --log).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..log.io import LogError, atomic_writer, write_jsonl
from ..log.lines import identified_objects
from ..log.records import MemoryLog, Problem
from ..models.base import Backend
from ..rates.stats import clears
from ..safe import dumps as json_dumps

EVIDENCE_SPREADS = ("local", "distributed")
CONTROLS = ("no_relation", "swapped_premises")
LENGTH_MATCH = 0.2  # a control's stand-in turn is within ±20% of the replaced passage's words
ITEMS = "items.jsonl"
BUILD = "build.json"


class FamilyError(LogError):
    """A family file that cannot be built (exit code 2), with every problem found."""


def _passages(x: Any, where: str, f: str, line: int, problems: list[Problem], n_min: int = 1,
              n_max: int | None = None) -> list[dict[str, str]]:
    ok = isinstance(x, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"].strip()
                                     and isinstance(p.get("speaker", ""), str) for p in x)
    if not ok:
        problems.append(Problem(f, line, where, "bad_value", "expected a list of passages {speaker, text} with "
                                "non-empty text"))
        return []
    if len(x) < n_min or (n_max is not None and len(x) > n_max):
        want = f"exactly {n_min}" if n_min == n_max else f"at least {n_min}"
        problems.append(Problem(f, line, where, "bad_value", f"needs {want} passage(s), has {len(x)}"))
        return []
    return [{"speaker": p.get("speaker", ""), "text": " ".join(p["text"].split())} for p in x]


def load_families(path: str | Path) -> list[dict[str, Any]]:
    """Parse and validate a family file; raises FamilyError naming file, line and field."""
    f = str(path)
    problems: list[Problem] = []
    out: list[dict[str, Any]] = []
    try:
        parsed = identified_objects(path, "family_id", problems)
    except LogError as e:
        raise FamilyError(e.problems) from None
    for n, d in parsed:
        unknown = sorted(set(d) - {"family_id", "valid", "invalid", "premises", "relation", "distractors",
                                   "conversation", "meta"})
        if unknown:
            problems.append(Problem(f, n, unknown[0], "unknown_field", "not a family field"))
        fid = d["family_id"]
        for k in ("valid", "invalid"):
            if not isinstance(d.get(k), str) or not d[k].strip():
                problems.append(Problem(f, n, k, "missing_field", "needs the memory text"))
        rel = d.get("relation")
        if not isinstance(rel, dict):
            problems.append(Problem(f, n, "relation", "missing_field", "needs {local: [...], distributed: [...]}"))
            rel = {}
        fam = {"family_id": fid, "valid": d.get("valid"), "invalid": d.get("invalid"),
               "conversation": d.get("conversation"),
               "premises": _passages(d.get("premises"), "premises", f, n, problems),
               "local": _passages(rel.get("local"), "relation.local", f, n, problems, 1, 1),
               "distributed": _passages(rel.get("distributed"), "relation.distributed", f, n, problems, 2),
               "distractors": _passages(d.get("distractors"), "distractors", f, n, problems, 2, 2)}
        out.append(fam)
    if not out and not problems:
        problems.append(Problem(f, None, None, "empty", "no family in the file"))
    if problems:
        raise FamilyError(problems)
    return out


def words(text: str) -> int:
    return len(text.split())


def length_matched(replaced: Sequence[dict[str, str]], candidates: Sequence[dict[str, str]],
                   seed: str) -> list[dict[str, Any]]:
    """One stand-in per replaced passage, each used once: the first candidate, in a seeded order,
    whose length in words is within LENGTH_MATCH of the replaced passage's (DerivAudit App. E: the
    controls keep the evidence's length and position); where none is, the closest in length,
    flagged `length_matched: false` (counted in build.json)."""
    order = list(candidates)
    random.Random(seed).shuffle(order)
    used: set[int] = set()
    out = []
    for p in replaced:
        n = words(p["text"])
        free = [i for i in range(len(order)) if i not in used]
        if not free:
            raise FamilyError([Problem("--log", None, None, "too_small",
                                       "the padding conversation has too few turns for the controls")])
        fit = [i for i in free if abs(words(order[i]["text"]) - n) <= LENGTH_MATCH * n]
        i = fit[0] if fit else min(free, key=lambda i: (abs(words(order[i]["text"]) - n), i))
        used.add(i)
        out.append({**order[i], "length_matched": bool(fit)})
    return out


def _place(rng: random.Random, size: int, n_core: int) -> list[int]:
    """Sorted positions (0-based, of `size`) where the core passages go."""
    return sorted(rng.sample(range(size), n_core))


def build(families_path: str | Path, log: MemoryLog, out: str | Path, *, size: int = 16,
          seed: int = 0) -> dict[str, Any]:
    """Write BUILT/items.jsonl (every cell and control of every family) and BUILT/build.json."""
    fams = load_families(families_path)
    convs = sorted(log.conversations)
    if not convs:
        raise FamilyError([Problem(str(families_path), None, None, "no_padding", "the --log has no turns")])
    problems = []
    items: list[dict[str, Any]] = []
    unmatched = 0
    for fam in fams:
        fid = fam["family_id"]
        long_enough = [c for c in convs if len(log.conversations[c].turns) >= size - 2] or convs
        conv = fam["conversation"] or random.Random(f"{seed}|{fid}|conv").choice(long_enough)
        if conv not in log.conversations:
            problems.append(Problem(str(families_path), None, f"{fid}.conversation", "unknown_conversation",
                                    f"{conv!r} is not in the --log"))
            continue
        turns = log.conversations[conv].turns
        core_max = len(fam["premises"]) + len(fam["distributed"]) + 2
        need = size - 2  # padding, plus the irrelevant turns that stand in for the relation or the premises
        if core_max > size or len(turns) < need:
            problems.append(Problem(str(families_path), None, fid, "too_small",
                                    f"--size {size} needs at least {core_max} passages and a padding conversation "
                                    f"of {need} turns ({conv!r} has {len(turns)})"))
            continue
        rng = random.Random(f"{seed}|{fid}")
        start = rng.randrange(0, len(turns) - need + 1)
        pool = [{"speaker": t.speaker, "text": " ".join(t.text.split()), "turn_id": t.turn_id}
                for t in turns[start : start + need]]
        others = [{"speaker": t.speaker, "text": " ".join(t.text.split()), "turn_id": t.turn_id}
                  for t in turns[:start] + turns[start + need :]]
        for ev in EVIDENCE_SPREADS:
            rel = fam[ev]
            core = ([("premise", p) for p in fam["premises"]] + [("relation", p) for p in rel]
                    + [("distractor", p) for p in fam["distractors"]])
            rng_ev = random.Random(f"{seed}|{fid}|{ev}")
            order = sorted(range(len(core)), key=lambda i: rng_ev.random())
            core = [core[i] for i in order]
            pos = _place(rng_ev, size, len(core))
            n_pad = size - len(core)
            padding = pool[:n_pad]
            # irrelevant history, shown only in the controls: turns of the padding conversation that
            # are not padding, each within LENGTH_MATCH of the words of the passage it replaces
            replaced = [*rel, *fam["premises"]]
            spares = length_matched(replaced, pool[n_pad:] + others, f"{seed}|{fid}|{ev}")
            stand_in = {id(p): x for p, x in zip(replaced, spares, strict=True)}
            unmatched += sum(not x["length_matched"] for x in spares)

            def layout(role: str | None, core=core, pos=pos, padding=padding, stand_in=stand_in) -> list[dict]:
                """The passages in place; with `role`, each passage of that role replaced by its
                stand-in (the one matched to its length)."""
                out, it_core, it_pad = [None] * size, iter(core), iter(padding)
                for i in range(size):
                    if i in pos:
                        r, p = next(it_core)
                        if r == role:
                            p, r = {**stand_in[id(p)], "replaces": role}, "irrelevant"
                        out[i] = {**p, "role": r}
                    else:
                        out[i] = {**next(it_pad), "role": "padding"}
                return out

            base = layout(None)
            versions = [(v, None, base, "accept" if v == "valid" else "reject") for v in ("valid", "invalid")]
            no_rel = layout("relation")
            swapped = layout("premise")
            versions += [("valid", "no_relation", no_rel, "reject"), ("valid", "swapped_premises", swapped, "reject"),
                         ("invalid", "swapped_premises", swapped, "reject")]
            for version, control, passages, expected in versions:
                items.append({"family_id": fid, "evidence": ev, "version": version, "control": control,
                              "memory": fam[version], "passages": passages, "expected": expected,
                              "padding_conversation": conv})
    if problems:
        raise FamilyError(problems)
    out = Path(out)
    write_jsonl(out / ITEMS, items)
    doc = {"families": len(fams), "items": len(items), "size": size, "seed": seed,
           "length_match": LENGTH_MATCH, "unmatched_controls": unmatched,
           "families_file": str(families_path),
           "families_sha256": hashlib.sha256(Path(families_path).read_bytes()).hexdigest()}
    with atomic_writer(out / BUILD) as fh:
        fh.write(json_dumps(doc, option=orjson.OPT_INDENT_2))
    return doc


def run(built: str | Path, backend: Backend, views: Sequence[str] = ("holistic", "obligation"), *,
        threshold: float = 0.0, operating: dict[str, dict[str, Any]] | None = None,
        progress: Callable[[str, int, int], None] = lambda *_: None) -> dict[str, Any]:
    """Score every built version with each view (obligations written by the same model, once per
    memory) and report acceptance per cell, the valid-invalid gap per evidence setting and the
    control outcomes. Each view is decided at `threshold` (argmax at 0), or at its operating point
    in `operating` (replay.replayed_thresholds: the threshold the run's replay read that view at)."""
    from ..admission.replay import Case, score_cases
    from ..admission.views import Memory, get_view
    from ..audit.decompose import decompose
    from ..log.records import Write
    from ..runs.folder import read_jsonl

    built = Path(built)
    if not (built / ITEMS).exists():
        raise FamilyError([Problem(str(built / ITEMS), None, None, "missing", "run `derivaudit families build` "
                                                                              "first")])
    items = read_jsonl(built / ITEMS)
    texts = sorted({it["memory"] for it in items})
    obligations: dict[str, list[tuple[str, str]]] = {}
    if any(get_view(v).needs_obligations for v in views):
        decs = decompose(backend, [Write(f"m{i}", "families", t, (), "families") for i, t in enumerate(texts)])
        obligations = {t: [(o.kind, o.text) for o in d.obligations] for t, d in zip(texts, decs, strict=True)}
        progress("obligations", len(texts), len(texts))
    rows = []
    for view in views:
        v = get_view(view)
        cases = [Case(f"{it['family_id']}", "families", it["memory"], "expanded", it["passages"],
                      Memory(it["memory"], obligations.get(it["memory"], [])), None) for it in items]
        th = operating[view]["threshold"] if operating else threshold
        for it, (score, _) in zip(items, score_cases(backend, cases, v), strict=True):
            accepted = None if score is None else clears(score, th)
            rows.append({**{k: it[k] for k in ("family_id", "evidence", "version", "control", "expected")},
                         "view": view, "score": score, "accepted": accepted})
        progress("scoring", 1, len(views))
    points = {view: {**op, "threshold": op["threshold"] if math.isfinite(op["threshold"]) else str(op["threshold"])}
              for view, op in (operating or {}).items()} or {
        view: {"threshold": threshold, "operating_point": "argmax" if threshold == 0 else "fixed"} for view in views}
    return {"views": list(views), "threshold": threshold, "operating_points": points,
            "families": len({it["family_id"] for it in items}),
            "summary": summarise(rows), "rows": rows, "model": backend.identity()}


def _rate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in rows if r["accepted"] is not None]
    return {"n": len(judged), "accepted": sum(r["accepted"] for r in judged) / len(judged) if judged else None,
            "errors": len(rows) - len(judged)}


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per view: acceptance per cell, the valid-invalid gap per evidence setting, control outcomes."""
    out: dict[str, Any] = {}
    for view in dict.fromkeys(r["view"] for r in rows):
        at = [r for r in rows if r["view"] == view]
        cells, gaps, controls = {}, {}, {}
        for ev in EVIDENCE_SPREADS:
            for version in ("valid", "invalid"):
                cells[f"{ev}/{version}"] = _rate([r for r in at if r["evidence"] == ev and r["version"] == version
                                                  and r["control"] is None])
            a, b = cells[f"{ev}/valid"]["accepted"], cells[f"{ev}/invalid"]["accepted"]
            gaps[ev] = None if a is None or b is None else a - b
            # removing relation support: share of valid memories that flip from accept to reject
            base = {r["family_id"]: r["accepted"] for r in at if r["evidence"] == ev and r["version"] == "valid"
                    and r["control"] is None}
            flips = [not r["accepted"] for r in at if r["evidence"] == ev and r["control"] == "no_relation"
                     and base.get(r["family_id"]) and r["accepted"] is not None]
            controls[f"{ev}/no_relation"] = {"n": len(flips), "flipped_to_reject": sum(flips) / len(flips)
                                             if flips else None,
                                             "valid_accepted": _rate([r for r in at if r["evidence"] == ev
                                                                      and r["control"] == "no_relation"])["accepted"]}
            for version in ("valid", "invalid"):
                controls[f"{ev}/swapped_premises/{version}"] = _rate(
                    [r for r in at if r["evidence"] == ev and r["control"] == "swapped_premises"
                     and r["version"] == version])
        out[view] = {"cells": cells, "gap": gaps, "controls": controls}
    return out
