"""A synthetic run folder of any size, shaped like a real `scan` + `replay` run (same files, same
fields), for measuring `derivaudit report` at scales no CPU model run reaches. Labels and scores are
random but consistent (supported writes score higher on average). Not used by the product.

    python benchmarks/synth_run.py OUT_DIR --writes 10000 --conversations 50
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit.admission.operating import decide  # noqa: E402
from derivaudit.admission.replay import setting_metrics  # noqa: E402
from derivaudit.rates.stats import SCOPE_HELP, rates  # noqa: E402
from derivaudit.runs import folder as runs  # noqa: E402

WORDS = ("the", "a", "went", "to", "with", "her", "his", "new", "job", "city", "trip", "cat", "dog", "plan",
         "school", "friend", "support", "group", "painting", "camping", "museum", "book", "family", "weekend",
         "because", "after", "before", "moved", "started", "joined", "loves", "wants")
SETTINGS = [("holistic", "citation_only")] + [(v, "expanded") for v in
                                              ("holistic", "atomic", "residual", "composition", "compact",
                                               "obligation", "qa", "qa_each")]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _prims(rng: random.Random, label: str, n: int) -> dict:
    d, e, r = {"supported": (1, 1, 0), "insufficient": (1, 0, 0), "contradicted": (1, 0, 1),
               "ambiguous": (0, 0, 0)}[label]
    return {"d": bool(d), "e": bool(e), "r": bool(r), "e_subset": sorted(rng.sample(range(1, n + 1), min(n, 2)))
            if e else [], "r_subset": [1] if r else [], "scores": {"d": 1.0, "e": 0.5, "r": -0.5}, "notes": []}


def make(out: Path, writes: int, conversations: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    per = max(1, writes // conversations)
    labels, views, obls, prims, score_rows = [], [], [], [], []
    for c in range(conversations):
        conv = f"conv-{c:03d}"
        turns = [{"turn_id": f"{conv}-t{i}", "order": i, "speaker": rng.choice(["Ana", "Ben"]),
                  "text": sentence(rng, rng.randint(8, 30)), "time": f"2025-01-{1 + i % 28:02d}T10:00:00Z",
                  "session": str(i // 20)} for i in range(per * 3 + 20)]
        for w in range(per if c < conversations - 1 else writes - per * (conversations - 1)):
            wid = f"{conv}-w{w}"
            at = 20 + 3 * w
            cited = rng.sample(turns[:at], rng.randint(1, 2))
            extra = rng.sample(turns[:at], 10)
            expanded = sorted({t["turn_id"]: t for t in cited + extra}.values(), key=lambda t: t["order"])
            text = sentence(rng, rng.randint(8, 20))
            limited = rng.random() < 0.2
            exp_label = rng.choices(["supported", "unsupported", "contradicted", "ambiguous"],
                                    [0.6, 0.2, 0.05, 0.15])[0]
            cit_label = "supported" if exp_label == "supported" and rng.random() < 0.6 else (
                "unsupported" if exp_label != "ambiguous" else "ambiguous")
            views.append({"write_id": wid, "conversation_id": conv, "text": text, "citation_only": cited,
                          "expanded": expanded, "search_limited": limited,
                          "provenance": {"cited": [t["turn_id"] for t in cited],
                                         "retrieved": [t["turn_id"] for t in extra], "bm25": {}, "candidates": at}})
            ob = [{"obligation_id": f"{wid}#o{k}", "write_id": wid, "kind": rng.choice(["fact", "relation",
                                                                                          "qualifier"]),
                   "subtype": None, "text": sentence(rng, 8)} for k in range(1, rng.randint(2, 4) + 1)]
            obls.append({"write_id": wid, "status": "ok", "error": None, "raw": [], "obligations": ob})
            per_view = {}
            for view, lab, ps in (("citation_only", cit_label, cited), ("expanded", exp_label, expanded)):
                olab = {"supported": "supported", "unsupported": "insufficient", "contradicted": "contradicted",
                        "ambiguous": "ambiguous"}[lab]
                per_view[view] = {"label": lab, "obligations": {o["obligation_id"]: olab for o in ob}}
                for o in ob:
                    a = _prims(rng, olab, len(ps))
                    disagree = rng.random() < 0.3
                    prims.append({"obligation_id": o["obligation_id"], "write_id": wid, "conversation_id": conv,
                                  "view": view, "passages": [t["turn_id"] for t in ps], "A": a,
                                  "B": _prims(rng, "ambiguous" if disagree else olab, len(ps)),
                                  "adjudicator": a if disagree else None, "adjudicated": disagree,
                                  "label_A": olab, "label_B": "ambiguous" if disagree else olab, "label": olab})
            labels.append({"write_id": wid, "conversation_id": conv, "text": text,
                           "citations": [t["turn_id"] for t in cited], "search_limited": limited,
                           "decomposition": "ok", "citation_label": cit_label, "expanded_label": exp_label,
                           "citation_only": per_view["citation_only"], "expanded": per_view["expanded"],
                           "provenance_repaired": cit_label == "unsupported" and exp_label == "supported",
                           "unresolved": False, "multi_passage": exp_label == "supported" and rng.random() < 0.3})
    settings_report, by_setting = {}, {}
    for view, ev in SETTINGS:
        key = f"{view}/{ev}"
        rows = []
        for lab in labels:
            label = lab["expanded_label"]  # one answer key for every setting, as replay uses
            truth = None if label == "ambiguous" else label == "supported"
            rows.append({"setting": key, "view": view, "evidence": ev, "write_id": lab["write_id"],
                         "conversation_id": lab["conversation_id"], "truth": truth,
                         "excluded": "ambiguous" if truth is None else None, "repaired": lab["provenance_repaired"],
                         "score": rng.gauss(1.0 if truth else -0.3, 1.2), "parts": []})
        used = decide(rows, "crossfit")
        m = setting_metrics(rows)
        m["operating_point"] = used
        settings_report[key] = m
        by_setting[key] = rows
        score_rows.extend(rows)
    replay = {"settings": settings_report, "operating_point": "auto", "operating_point_used": "crossfit",
              "reference": {"labels": "model", "view": "expanded"}, "combine": "min", "differences": [],
              "noise": {"levels": {str(n): {"mean_logodds": 1.0 - 0.2 * n, "admitted_argmax": 0.8 - 0.05 * n,
                                            "admitted_at_threshold": None, "scoring_errors": 0} for n in (0, 2, 4)},
                        "writes": writes, "skipped_too_few_extras": 0},
              "model": {"model": "synthetic"}}
    out.mkdir(parents=True, exist_ok=True)
    runs.write_rows(out, runs.LABELS, labels)
    runs.write_rows(out, runs.VIEWS, views)
    runs.write_rows(out, runs.OBLIGATIONS, obls)
    runs.write_rows(out, runs.PRIMITIVES, prims)
    runs.write_rows(out, runs.REPLAY_SCORES, score_rows)
    runs.write_json(out, runs.REPLAY, replay)
    scope = rates([x for x in labels])
    for k, v in scope.items():
        v["meaning"] = SCOPE_HELP[k]
    runs.write_json(out, runs.SCOPE, {
        "scope": scope, "agreement": {"D": {"agreement": 0.9, "kappa": 0.7}, "E": {"agreement": 0.8, "kappa": 0.6},
                                      "R": {"agreement": 0.85, "kappa": 0.5}, "label": {"agreement": 0.7, "kappa": 0.5},
                                      "adjudication_rate": 0.3, "adjudicated": 0, "items": len(prims)},
        "decomposition": {"ok": writes, "retried": 0, "fallback": 0, "failure_rate": 0.0,
                          "obligations": sum(len(o["obligations"]) for o in obls)},
        "scoring_errors": 0, "labels": {}})
    runs.save_meta(out, {"derivaudit": "synthetic", "input_files": ["synthetic.jsonl"], "input_sha": "0" * 16,
                         "annotators": {}, "skipped_records": [], "evidence": {}, "timings": {}, "usage": []})
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--writes", type=int, default=10_000)
    ap.add_argument("--conversations", type=int, default=50)
    a = ap.parse_args()
    make(a.out, a.writes, a.conversations)
    print(f"wrote {a.out}")
