"""CSV export of reference labels, safe to open in a spreadsheet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ..audit.labels import answers
from ..log.io import atomic_writer
from ..rates.trust import category_of, obligation_confidence, write_confidence
from ..runs import folder as runs
from ..safe import cell


def _prims(p: dict[str, Any] | None, passages: list[str]) -> dict[str, Any]:
    """D/E/R answers, the slot check (S: None where not asked; a yes is also an R yes) and the
    implying passages as turn ids of the view."""
    if not p:
        return {"D": None, "E": None, "R": None, "S": None, "E_turns": None, "R_turns": None}
    return {"D": p["d"], "E": p["e"], "R": p["r"], "S": p.get("s"),
            "E_turns": " ".join(passages[n - 1] for n in p["e_subset"]),
            "R_turns": " ".join(passages[n - 1] for n in p["r_subset"])}


def rows(run: Path, level: str) -> list[dict[str, Any]]:
    runs.require(run, (runs.LABELS, runs.PRIMITIVES), f"run `derivaudit scan ... -o {run}` first")
    labels = runs.read_rows(run, runs.LABELS)
    text_of = {r["write_id"]: r["text"] for r in labels}
    prims = runs.read_rows(run, runs.PRIMITIVES)
    calibration = (runs.load_meta(run).get("calibration") or {}) if runs.exists(run, runs.META) else {}
    if level == "write":
        confidence = write_confidence(labels, prims, calibration)
        implied: dict[tuple[str, str], dict[str, set[str]]] = {}
        for p in prims:
            f, got = answers(p), implied.setdefault((p["write_id"], p["view"]), {"e": set(), "r": set()})
            got["e"].update(p["passages"][n - 1] for n in f["e_subset"])
            got["r"].update(p["passages"][n - 1] for n in f["r_subset"])
        out = []
        for r in labels:
            for view in ("citation_only", "expanded"):
                got = implied.get((r["write_id"], view), {"e": set(), "r": set()})
                out.append({"write_id": r["write_id"], "conversation_id": r["conversation_id"], "text": r["text"],
                            "view": view, "label": r[view]["label"], "citations": " ".join(r["citations"]),
                            "E_turns": " ".join(sorted(got["e"])), "R_turns": " ".join(sorted(got["r"])),
                            "search_limited": r["search_limited"], "decomposition": r["decomposition"],
                            "provenance_repaired": r["provenance_repaired"], "unresolved": r["unresolved"],
                            "multi_passage": r["multi_passage"], "obligations": len(r[view]["obligations"]),
                            "category": category_of(r), "confidence": confidence.get(r["write_id"])})
        return out
    obl_text = {o["obligation_id"]: (o["kind"], o["subtype"], o["text"])
                for d in runs.read_rows(run, runs.OBLIGATIONS) for o in d["obligations"]}
    out = []
    for r in prims:
        kind, sub, text = obl_text.get(r["obligation_id"], (None, None, None))
        row = {"obligation_id": r["obligation_id"], "write_id": r["write_id"], "conversation_id": r["conversation_id"],
               "write_text": text_of.get(r["write_id"]), "kind": kind, "subtype": sub, "obligation": text,
               "view": r["view"], "label": r["label"], "label_own": r.get("label_own", r["label"]),
               "settled_by": "; ".join(r.get("settled_by") or []), "adjudicated": r["adjudicated"],
               "passage_turn_ids": " ".join(r["passages"]), "confidence": obligation_confidence(r, calibration)}
        for who in ("A", "B", "adjudicator"):
            row.update({f"{who}_{k}": v for k, v in _prims(r[who], r["passages"]).items()})
        out.append(row)
    return out


def export_csv(run: str | Path, output: str | Path, level: str = "write") -> int:
    data = [{k: cell(v) for k, v in r.items()} for r in rows(Path(run), level)]
    df = pl.DataFrame(data, infer_schema_length=None)
    with atomic_writer(output) as fh:
        df.write_csv(fh)
    return len(df)
