"""Labels of finished runs under today's primitive-to-label rules, against the labels the run has:
what a rule change (labels.py) does to gold accuracy, computed from the same model answers.

Usage:
    python benchmarks/relabel.py RUN [RUN ...]

For each run folder: the memory labels from each obligation's own view answers ("own": the rows'
`label_own`, else `label`), with each rule after the annotation alone ("carry": refutations carried
across views; "values": value conflicts) and with both (`scan.settled`, what a scan does); then
"reread": both, on the obligations today's reading of the run's own generated decompositions keeps
(annotate.parse_obligations; an obligation it no longer keeps loses its rows, the others keep their
ids and answers). The gold metrics of each (accuracy, per-category recall, false-supported, per
conversation) and every write whose category changes from own to reread. No model is called.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit import load_log
from derivaudit.audit import gold  # noqa: E402
from derivaudit.audit.conflicts import Passage  # noqa: E402
from derivaudit.audit.decompose import parse_obligations  # noqa: E402
from derivaudit.audit.labels import memory_label  # noqa: E402
from derivaudit.audit.scan import settled, write_time  # noqa: E402
from derivaudit.runs.folder import load_meta, read_jsonl  # noqa: E402


def inputs(run: Path):
    """Obligation texts, memory times and passages of a finished run (its log from meta.json)."""
    texts = {o["obligation_id"]: o["text"] for d in read_jsonl(run / "obligations.jsonl") for o in d["obligations"]}
    log = load_log(load_meta(run)["config"]["files"])
    when = {w.write_id: write_time(log, w) for w in log.writes}
    turns = {(v["conversation_id"], t["turn_id"]): Passage(t["turn_id"], t["text"], t.get("time"))
             for v in read_jsonl(run / "views.jsonl") for vn in ("citation_only", "expanded") for t in v[vn]}
    return texts, when, turns


def reread(run: Path) -> set[str]:
    """The obligation ids today's parse rules keep from the run's generated decompositions (a
    fallback keeps its single whole-record obligation)."""
    log = load_log(load_meta(run)["config"]["files"])
    writes = {w.write_id: w for w in log.writes}
    keep = set()
    for d in read_jsonl(run / "obligations.jsonl"):
        if d["status"] == "fallback" or not d.get("raw"):
            keep |= {o["obligation_id"] for o in d["obligations"]}
        else:
            keep |= {o.obligation_id for o in parse_obligations(writes[d["write_id"]], d["raw"][-1])}
    return keep


def relabel(labels: list[dict], prims: list[dict], settle_with, **rules) -> list[dict]:
    own = [{k: v for k, v in p.items() if k not in ("settled", "settled_by", "carried", "conflict", "label_own")}
           | {"label": p.get("label_own", p["label"])} for p in prims]
    rows = settled(own, *settle_with, **rules) if settle_with else own
    by = {}
    for p in rows:
        by.setdefault((p["write_id"], p["view"]), []).append(p["label"])
    out = []
    for r in labels:
        cit = memory_label(by[(r["write_id"], "citation_only")]) if (r["write_id"], "citation_only") in by else None
        exp = memory_label(by[(r["write_id"], "expanded")]) if (r["write_id"], "expanded") in by else None
        out.append({**r, "citation_label": cit, "expanded_label": exp, "category": gold.category(cit, exp)})
    return out


def line(name: str, g: dict | None) -> str:
    if not g:
        return f"{name:8} (no gold)"
    rec = " ".join(f"{c[:4]} {g['recall'][c]:.2f}" for c in gold.CATEGORIES if g["recall"][c] is not None)
    fs = g["false_supported"]
    return (f"{name:8} acc {g['accuracy']:.3f} ({g['correct']}/{g['n']})  {rec}  ambiguous {g['ambiguous']:.2f}  "
            f"false-supported {fs['count']}/{fs['n']}")


def main() -> None:
    for run in map(Path, sys.argv[1:]):
        labels, prims = read_jsonl(run / "labels.jsonl"), read_jsonl(run / "primitives.jsonl")
        got = inputs(run)
        kept = reread(run)
        own, car = relabel(labels, prims, None), relabel(labels, [p for p in prims if p["obligation_id"] in kept], got)
        print(run, f"({len({p['obligation_id'] for p in prims} - kept)} obligations not kept on rereading)")
        g_own, g_car = gold.gold_metrics(own), gold.gold_metrics(car)
        print("  " + line("own", g_own))
        print("  " + line("carry", gold.gold_metrics(relabel(labels, prims, got, values=False))))
        print("  " + line("values", gold.gold_metrics(relabel(labels, prims, got, carry=False))))
        print("  " + line("both", gold.gold_metrics(relabel(labels, prims, got))))
        print("  " + line("reread", g_car))
        if g_own and g_car:
            for conv in g_own["per_conversation"]:
                a, b = g_own["per_conversation"][conv], g_car["per_conversation"][conv]
                print(f"    {conv:12} {a['correct']:3d} -> {b['correct']:3d} of {a['n']}")
        for a, b in zip(own, car, strict=True):
            if a["category"] != b["category"]:
                print(f"  {a['write_id']:10} gold {a.get('gold')!s:20} {a['category']} -> {b['category']}")


if __name__ == "__main__":
    main()
