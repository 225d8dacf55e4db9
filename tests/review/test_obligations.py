"""The human review loop on a synthetic run (real files, no model): a blinded stratified sheet out,
answers filled in by a script, imported, and agreement equal to a hand computation."""

from __future__ import annotations

import csv
import io
import shutil

import orjson
import pytest
from typer.testing import CliRunner

from derivaudit.audit.labels import obligation_label
from derivaudit.cli import app
from derivaudit.review.obligations import COLUMNS, ReviewError, import_review, read_review, sample
from derivaudit.runs import folder as runs
from derivaudit.runs.folder import read_jsonl

runner = CliRunner()


@pytest.fixture
def run(synth_run, tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(synth_run, dst)
    return dst


def _sheet(path):
    raw = path.read_bytes()
    return raw, list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"), newline="")))


def _write(path, rows, bom=True):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8-sig" if bom else "utf-8"))


def test_the_sample_is_stratified_blinded_seeded_and_formula_safe(run, tmp_path):
    labels = read_jsonl(run / "labels.jsonl")
    for r in labels:
        r["text"] = "=HYPERLINK(\"http://x\")" + r["text"]
    runs.write_rows(run, runs.LABELS, labels)
    doc = sample(run, tmp_path / "a.csv", per_stratum=3, seed=1)
    raw, rows = _sheet(tmp_path / "a.csv")
    assert raw.startswith(b"\xef\xbb\xbf")  # UTF-8 BOM by default, for Excel
    assert list(rows[0]) == list(COLUMNS)  # no label, annotator or stratum column
    assert len(rows) == len(doc["rows"]) == sum(doc["strata"].values())
    assert all(v == min(3, doc["available"][s]) or s in ("repaired", "multi_passage") for s, v in doc["strata"].items())
    assert {s.split("/")[0] for s in doc["strata"] if "/" in s} == {"citation_only", "expanded"}
    assert all(r["memory"].startswith("'=") for r in rows)  # a spreadsheet shows it, never runs it
    assert all(not r[h] for r in rows for h in ("human_D", "human_E", "human_R", "human_label"))
    assert all(r["passages"].startswith("[1] ") or r["passages"] == "(no passages)" for r in rows)
    prims = {(p["obligation_id"], p["view"]) for p in read_jsonl(run / "primitives.jsonl")}
    assert all((k["obligation_id"], k["view"]) in prims for k in doc["rows"])
    sample(run, tmp_path / "b.csv", per_stratum=3, seed=1)
    assert (tmp_path / "b.csv").read_bytes() == raw  # deterministic under --seed
    sample(run, tmp_path / "c.csv", per_stratum=3, seed=2, bom=False)
    assert not (tmp_path / "c.csv").read_bytes().startswith(b"\xef\xbb\xbf")


def test_round_trip_agreement_equals_a_hand_computation(run, tmp_path):
    doc = sample(run, tmp_path / "review.csv", per_stratum=4, seed=0)
    _, rows = _sheet(tmp_path / "review.csv")
    key = {k["review_id"]: k for k in doc["rows"]}
    prims = {(p["obligation_id"], p["view"]): p for p in read_jsonl(run / "primitives.jsonl")}
    yn = {True: "yes", False: "no"}
    model, human = [], []
    for n, r in enumerate(rows):  # the reviewer: agrees with the model except E on every third row
        if n == 5:
            continue  # left blank: not reviewed
        p = prims[(key[r["review_id"]]["obligation_id"], key[r["review_id"]]["view"])]
        f = p["adjudicator"] or p["A"]
        d, e, rr = f["d"], f["e"] if n % 3 else not f["e"], f["r"]
        r.update(human_D=yn[d].upper() if n % 2 else yn[d], human_E=yn[e], human_R=yn[rr])
        model.append((f["d"], f["e"], f["r"], p["label"]))
        human.append((d, e, rr, obligation_label(d, e, rr)))
    _write(tmp_path / "review.csv", rows)
    m = import_review(run, tmp_path / "review.csv")
    assert m["reviewed"] == len(rows) - 1 == len(read_jsonl(run / "review.jsonl"))

    def kappa(x, y):  # written out here, not the product's helper
        n = len(x)
        po = sum(a == b for a, b in zip(x, y, strict=True)) / n
        pe = sum((x.count(c) / n) * (y.count(c) / n) for c in set(x) | set(y))
        return (po - pe) / (1 - pe) if pe != 1 else (1.0 if po == 1 else None)

    for i, k in enumerate(("D", "E", "R", "label")):
        xs, ys = [t[i] for t in model], [t[i] for t in human]
        same = sum(a == b for a, b in zip(xs, ys, strict=True))
        assert m["primitives"][k]["agreement"] == pytest.approx(same / len(xs))
        assert m["primitives"][k]["kappa"] == pytest.approx(kappa(xs, ys))
    assert m["primitives"]["D"]["agreement"] == 1 and m["primitives"]["E"]["agreement"] < 1
    for lab, row in m["confusion"].items():
        for hl, count in row.items():
            assert count == sum(a[3] == lab and b[3] == hl for a, b in zip(model, human, strict=True))
    r = runner.invoke(app, ["report", str(run), "--format", "json"])
    assert r.exit_code == 0 and orjson.loads(r.stdout)["review"]["reviewed"] == m["reviewed"]


def test_bad_sheets_name_line_and_column_and_import_nothing(run, tmp_path):
    sample(run, tmp_path / "review.csv", per_stratum=2, seed=0)
    _, rows = _sheet(tmp_path / "review.csv")
    good = dict(rows[0], human_D="yes", human_E="yes", human_R="no")
    cases = [
        (dict(rows[1], human_D="yes", human_E="maybe", human_R="no"), "column human_E: 'maybe' is not yes or no"),
        (dict(rows[1], review_id="r9999", human_D="yes", human_E="no", human_R="no"), "not in this run's review"),
        (dict(rows[1], human_D="yes", human_E="yes", human_R="no", human_label="contradicted"),
         "contradicts the row's own D/E/R"),
        (dict(rows[1], human_D="yes", human_E="", human_R="no"), "column human_E: empty"),
        (dict(good), "already given on line 2"),
    ]
    for bad, message in cases:
        _write(tmp_path / "bad.csv", [good, bad])
        with pytest.raises(ReviewError, match="bad.csv:3: .*" + message.replace("(", r"\(").replace(")", r"\)")):
            read_review(run, tmp_path / "bad.csv")
        r = runner.invoke(app, ["review", "import", str(run), str(tmp_path / "bad.csv")])
        assert r.exit_code == 2 and "bad.csv:3" in r.output
        assert not (run / "review.jsonl").exists()  # nothing half-imported
    _write(tmp_path / "empty.csv", rows)
    with pytest.raises(ReviewError, match="no row has a reviewer's answer"):
        read_review(run, tmp_path / "empty.csv")
    (tmp_path / "cols.csv").write_text("review_id,human_D\nr0001,yes\n")
    with pytest.raises(ReviewError, match="cols.csv:1: missing column.*human_E"):
        read_review(run, tmp_path / "cols.csv")
    r = runner.invoke(app, ["replay", str(run), "--reference", "human"])
    assert r.exit_code == 2 and "review import" in r.output
