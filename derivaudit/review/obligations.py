"""Human review of the reference labels (DerivAudit §5: a stratified review of the annotation, 96%
agreement): a blinded, stratified sample to a spreadsheet, the reviewers' answers back into the run
folder, and agreement between the model's primitives and the reviewers'.

    RUN/review_sample.json  which primitive row each review id stands for, and its stratum (never
                            in the CSV: the reviewer must not see the model's label)
    RUN/review.jsonl        the imported human answers, one row per reviewed id
"""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from typing import Any

from ..audit.labels import answers, memory_label, obligation_label
from ..log.io import atomic_writer
from ..rates.stats import cohen_kappa
from ..runs import folder as runs
from ..safe import cell

REVIEW_LABELS = ("supported", "insufficient", "contradicted", "ambiguous")
PRIMITIVES = ("D", "E", "R")
HUMAN = ("human_D", "human_E", "human_R", "human_label")
COLUMNS = ("review_id", "memory", "obligation", "passages", *HUMAN, "reviewer_notes")
PER_STRATUM = 25


class ReviewError(ValueError):
    """A review file that cannot be imported (exit code 2); nothing was written."""


def strata(prim: dict[str, Any], repaired: set[str]) -> list[str]:
    """Every stratum a primitive row belongs to: its view × final label, and the rarer kinds the
    paper samples on purpose (provenance-repaired writes' expanded rows, multi-passage support)."""
    out = [f"{prim['view']}/{prim['label']}"]
    if prim["view"] == "expanded" and prim["write_id"] in repaired:
        out.append("repaired")
    if len(answers(prim).get("e_subset") or []) > 1:
        out.append("multi_passage")
    return out


def sample(run: str | Path, output: str | Path, *, per_stratum: int = PER_STRATUM, seed: int = 0,
           bom: bool = True) -> dict[str, Any]:
    """Write a blinded review sheet of up to `per_stratum` obligation × view rows per stratum
    (seeded), in a seeded random order, with empty columns for the reviewer's D, E, R and label.
    Returns the sample key (also written to RUN/review_sample.json)."""
    run = Path(run)
    runs.require(run, (runs.PRIMITIVES, runs.LABELS, runs.VIEWS, runs.OBLIGATIONS),
                 f"run `derivaudit scan ... -o {run}` first")
    prims = runs.read_rows(run, runs.PRIMITIVES)
    labels = {r["write_id"]: r for r in runs.read_rows(run, runs.LABELS)}
    repaired = {w for w, r in labels.items() if r.get("provenance_repaired")}
    by_stratum: dict[str, list[int]] = {}
    for i, p in enumerate(prims):
        for s in strata(p, repaired):
            by_stratum.setdefault(s, []).append(i)
    chosen: dict[int, str] = {}
    for s in sorted(by_stratum):
        pool = [i for i in by_stratum[s] if i not in chosen]
        rng = random.Random(f"{seed}|{s}")
        for i in rng.sample(pool, min(per_stratum, len(pool))):
            chosen[i] = s
    order = sorted(chosen)
    random.Random(f"{seed}|order").shuffle(order)
    passages = {(v["write_id"], name): {t["turn_id"]: t for t in v[name]}
                for v in runs.read_rows(run, runs.VIEWS) for name in runs.VIEW_NAMES}
    obl_text = {o["obligation_id"]: o["text"] for d in runs.read_rows(run, runs.OBLIGATIONS) for o in d["obligations"]}
    width = max(4, len(str(len(order))))
    key, rows = [], []
    for n, i in enumerate(order, start=1):
        p = prims[i]
        rid = f"r{n:0{width}d}"
        turns = passages[(p["write_id"], p["view"])]
        block = sheet_passages([turns[t] for t in p["passages"]])
        rows.append({"review_id": rid, "memory": labels[p["write_id"]]["text"],
                     "obligation": obl_text.get(p["obligation_id"], ""), "passages": block,
                     **{h: "" for h in HUMAN}, "reviewer_notes": ""})
        key.append({"review_id": rid, "obligation_id": p["obligation_id"], "write_id": p["write_id"],
                    "view": p["view"], "stratum": chosen[i]})
    write_sheet(output, COLUMNS, rows, bom=bom)
    doc = {"seed": seed, "per_stratum": per_stratum, "file": str(output),
           "strata": {s: sum(x["stratum"] == s for x in key) for s in sorted(by_stratum)},
           "available": {s: len(v) for s, v in sorted(by_stratum.items())}, "rows": key}
    runs.write_json(run, runs.REVIEW_SAMPLE, doc)
    return doc


def sheet_passages(turns: list[dict[str, Any]]) -> str:
    """Passages as a review sheet shows them: numbered, speaker, text on one line each."""
    return "\n".join(f"[{k}] {t['speaker']}: {' '.join(t['text'].split())}" for k, t in enumerate(turns, start=1)) \
        or "(no passages)"


def write_sheet(output: str | Path, columns: tuple[str, ...], rows: list[dict[str, Any]], *, bom: bool = True,
                notes: list[str] = ()) -> None:
    """A review sheet, atomically: `# ` note lines, then CSV with CRLF line ends, cells a
    spreadsheet would run as formulas neutralised, UTF-8 with a byte-order mark unless `bom` is off."""
    buf = io.StringIO()
    for line in notes:
        buf.write(f"# {line}\r\n")
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\r\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: cell(v) for k, v in r.items()})
    with atomic_writer(output) as fh:
        fh.write(buf.getvalue().encode("utf-8-sig" if bom else "utf-8"))


def _answer(value: str, column: str) -> bool | None:
    v = value.strip().lower()
    if v in ("yes", "y"):
        return True
    if v in ("no", "n"):
        return False
    raise ValueError(f"column {column}: {value.strip()!r} is not yes or no")


MAX_SHEET_BYTES = 64 * 2**20  # a review sheet larger than this is refused before it is read


def read_sheet(path: str | Path, key: dict[str, Any], columns: tuple[str, ...],
               foreign: Any = None) -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    """The filled rows of a review sheet: (where, {column: text}) for each row whose review id is in
    `key`, and the problems found (an id not in `key` — `foreign(id)` may say whose it is —, an id
    given twice). Lines starting with `#` before the header are notes; rows left entirely blank are
    skipped; a file that cannot be read, is not UTF-8, is too big or lacks a column is a ReviewError."""
    path = Path(path)
    try:
        if path.is_file() and path.stat().st_size > MAX_SHEET_BYTES:
            raise ReviewError(f"{path}: {path.stat().st_size:,} bytes is more than a review sheet can be "
                              f"({MAX_SHEET_BYTES:,} at most)")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SHEET_BYTES + 1)
        if len(raw) > MAX_SHEET_BYTES:
            raise ReviewError(f"{path}: more than {MAX_SHEET_BYTES:,} bytes: not a review sheet")
        text = raw.decode("utf-8-sig")
    except OSError as e:
        raise ReviewError(f"{path}: cannot read ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise ReviewError(f"{path}: not UTF-8 (byte {e.start}); save the sheet as CSV UTF-8") from e
    lines = text.splitlines(keepends=True)
    notes = 0
    while notes < len(lines) and lines[notes].startswith("#"):
        notes += 1
    reader = csv.reader(io.StringIO("".join(lines[notes:]), newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ReviewError(f"{path}: empty file (expected the header {', '.join(columns)})") from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise ReviewError(f"{path}:{notes + 1}: missing column(s) {', '.join(missing)}")
    col = {c: header.index(c) for c in columns}
    problems: list[str] = []
    out: list[tuple[str, dict[str, str]]] = []
    seen: dict[str, int] = {}
    line = reader.line_num
    for cells in reader:
        start, line = notes + line + 1, reader.line_num
        if not any(c.strip() for c in cells):
            continue
        where = f"{path}:{start}"
        row = {c: (cells[i] if i < len(cells) else "") for c, i in col.items()}
        rid = row["review_id"].strip()
        if rid not in key:
            whose = foreign(rid) if foreign else None
            problems.append(f"{where}: column review_id: {rid!r} " + (whose or "is not in this run's review sample"))
            continue
        if rid in seen:
            problems.append(f"{where}: column review_id: {rid} already given on line {seen[rid]}")
            continue
        seen[rid] = start
        out.append((where, row))
    return out, problems


def raise_problems(problems: list[str]) -> None:
    """All of a sheet's problems at once (the first 20), as one ReviewError."""
    if problems:
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        raise ReviewError("\n".join(problems[:20]) + more)


def read_review(run: str | Path, path: str | Path) -> list[dict[str, Any]]:
    """Validate a filled review sheet against the run's sample; every problem is collected and
    raised together as one ReviewError (file, line, column). Rows left entirely blank are not
    reviewed and are skipped."""

    run, path = Path(run), Path(path)
    if not runs.exists(run, runs.REVIEW_SAMPLE):
        raise ReviewError(f"{runs.path(run, runs.REVIEW_SAMPLE)} is missing: run `derivaudit review sample "
                          f"{run} -o review.csv` first")
    key = {r["review_id"]: r for r in runs.read_json(run, runs.REVIEW_SAMPLE)["rows"]}
    filled, problems = read_sheet(path, key, ("review_id", *HUMAN))
    out: list[dict[str, Any]] = []
    for where, row in filled:
        rid = row["review_id"].strip()
        values = {h: row[h].strip() for h in HUMAN}
        if not any(values.values()):
            continue  # not reviewed
        blank = [h for h in HUMAN[:3] if not values[h]]
        if blank:
            problems.append(f"{where}: column {blank[0]}: empty (answer yes or no, or leave the whole row blank)")
            continue
        try:
            d, e, r = (_answer(values[h], h) for h in HUMAN[:3])
        except ValueError as err:
            problems.append(f"{where}: {err}")
            continue
        derived = obligation_label(d, e, r)
        label = values["human_label"].lower()
        if label and label not in REVIEW_LABELS:
            problems.append(f"{where}: column human_label: {values['human_label']!r} is not one of "
                            f"{', '.join(REVIEW_LABELS)} (or blank)")
            continue
        if label and label != derived:
            problems.append(f"{where}: column human_label: {label} contradicts the row's own D/E/R, which give "
                            f"{derived} (leave it blank to derive it)")
            continue
        out.append({**key[rid], "d": d, "e": e, "r": r, "label": derived})
    raise_problems(problems)
    if not out:
        raise ReviewError(f"{path}: no row has a reviewer's answer (fill human_D, human_E, human_R)")
    return out


def import_review(run: str | Path, path: str | Path) -> dict[str, Any]:
    """Validate and store the reviewers' answers (RUN/review.jsonl, atomically: all or nothing);
    returns the agreement report."""
    rows = read_review(run, path)
    runs.write_rows(run, runs.REVIEW, rows)
    return review_metrics(run)


def review_metrics(run: str | Path) -> dict[str, Any] | None:
    """Model (final primitives) vs human: agreement and Cohen's κ per primitive and for the label,
    agreement within each model label, and the confusion matrix (model label down, human across).
    None when nothing was reviewed."""
    human = runs.read_rows_if(run, runs.REVIEW)
    if not human:
        return None
    prims = {(p["obligation_id"], p["view"]): p for p in runs.read_rows(run, runs.PRIMITIVES)}
    pairs = []
    for h in human:
        p = prims.get((h["obligation_id"], h["view"]))
        if p is not None:
            f = answers(p)
            pairs.append(({"D": f["d"], "E": f["e"], "R": f["r"], "label": p["label"]},
                          {"D": h["d"], "E": h["e"], "R": h["r"], "label": h["label"]}, h))
    per: dict[str, Any] = {}
    for k in (*PRIMITIVES, "label"):
        both = [(m[k], x[k]) for m, x, _ in pairs if m[k] is not None and x[k] is not None]
        per[k] = {"n": len(both), "agreement": _share(a == b for a, b in both),
                  "kappa": cohen_kappa([a for a, _ in both], [b for _, b in both]) if both else None}
    confusion = {m: {x: 0 for x in REVIEW_LABELS} for m in REVIEW_LABELS}
    for m, x, _ in pairs:
        confusion[m["label"]][x["label"]] += 1
    by_label = {m: {"n": sum(row.values()), "agreement": row[m] / sum(row.values()) if sum(row.values()) else None}
                for m, row in confusion.items()}
    strata: dict[str, list[bool]] = {}
    for m, x, h in pairs:
        strata.setdefault(h["stratum"], []).append(m["label"] == x["label"])
    return {"reviewed": len(pairs), "primitives": per, "by_model_label": by_label, "confusion": confusion,
            "by_stratum": {s: {"n": len(v), "agreement": _share(v)} for s, v in sorted(strata.items())}}


def _share(xs: Any) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def human_write_labels(run: str | Path, view: str = "expanded") -> dict[str, str]:
    """Write-level labels from the reviewers' answers (the memory rule over the obligation labels),
    for writes whose every obligation was reviewed in `view`."""

    human = {(h["obligation_id"], h["view"]): h["label"] for h in runs.read_rows_if(run, runs.REVIEW)}
    per_write: dict[str, list[str | None]] = {}
    for p in runs.read_rows(run, runs.PRIMITIVES):
        if p["view"] == view:
            per_write.setdefault(p["write_id"], []).append(human.get((p["obligation_id"], view)))
    return {w: memory_label(ls) for w, ls in per_write.items() if ls and all(x is not None for x in ls)}
