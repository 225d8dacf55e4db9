"""Corrected rates, confidence and review where it counts, end to end on real run folders scanned by
a deterministic verifier (tests/rule_backend.py), through the CLI as a user types it."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from derivaudit import load_log
from derivaudit.audit.annotate import Annotator
from derivaudit.cli import app
from derivaudit.rates.trust import accuracy_at_coverage, answer_confidence, obligation_confidence
from derivaudit.runs import folder as runs

from ..conftest import FIXTURES
from ..rule_backend import RuleBackend

runner = CliRunner()


def _scan(log_path: Path, run: Path, **cfg) -> Path:
    from derivaudit.audit.scan import ScanConfig, scan

    be = RuleBackend()
    anns = (Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a"))
    scan(load_log(log_path), run, anns, cfg=ScanConfig(use_cache=False, calibrate_on="packaged", **cfg))
    return run


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory) -> Path:
    """fixtures/memories.jsonl (24 writes with meta.gold, 3 conversations), every write audited."""
    return _scan(FIXTURES / "memories.jsonl", tmp_path_factory.mktemp("trust") / "run")


def _copy(run: Path, dst: Path) -> Path:
    shutil.copytree(run, dst)
    (dst / runs.LOCK).unlink(missing_ok=True)
    return dst


def _strip_gold(run: Path) -> None:
    rows = runs.read_rows(run, runs.LABELS)
    for r in rows:
        r["gold"] = None
    runs.write_rows(run, runs.LABELS, rows)


def _report(run: Path, *args: str) -> dict:
    r = runner.invoke(app, ["report", str(run), "--format", "json", *args])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


# ---------------------------------------------------------------- confidence


def test_answer_confidence_reads_the_calibration_scale():
    scale = ([1.0, 2.0, 3.0, 4.0], [-3.0, -2.0, -1.0, 0.5])  # positives, negatives
    assert answer_confidence(5.0, True, scale) == 1.0  # above every negative
    assert answer_confidence(0.0, True, scale) == 0.75  # above 3 of 4 negatives
    assert answer_confidence(-4.0, False, scale) == 1.0  # below every positive
    assert answer_confidence(2.5, False, scale) == 0.5  # two positives score above it
    assert answer_confidence(None, True, scale) is None and answer_confidence(1.0, True, None) is None


def test_an_answer_set_by_a_rule_is_certain_and_an_ambiguous_label_is_not():
    cal = {"A": {"scale": {"e": {"pos": [1.0, 2.0], "neg": [-1.0, 0.0]}, "r": {"pos": [1.0], "neg": [-2.0, -1.0]}}}}
    row = {"label": "supported", "A": {"e": True, "r": False, "scores": {"e": -0.5, "r": -1.5}}, "adjudicator": None}
    assert obligation_confidence(row, cal) == 0.5  # E yes above 1 of 2 negatives; R no below the 1 positive
    row["A"]["scores"]["e"] = 0.5
    assert obligation_confidence(row, cal) == 1.0
    row["A"]["scores"]["r"] = 1.5  # a no scoring above every positive: no confidence in that no
    assert obligation_confidence(row, cal) == 0.0
    ruled = {**row, "settled": {"e": True, "r": True}, "label": "contradicted"}
    ruled["A"] = {"e": True, "r": False, "scores": {"e": 5.0, "r": 1.5}}
    assert obligation_confidence(ruled, cal) == 1.0  # R set by a rule: certain; E far above its negatives
    assert obligation_confidence({**row, "label": "ambiguous"}, cal) == 0.0


def test_accuracy_at_coverage_ranks_by_confidence():
    rows = [{"write_id": f"w{i}", "category": "unsupported"} for i in range(4)]
    conf = {"w0": 0.9, "w1": 0.8, "w2": 0.2, "w3": 0.1}
    ref = {"w0": "unsupported", "w1": "unsupported", "w2": "contradicted", "w3": "unsupported"}
    acc = accuracy_at_coverage(rows, conf, ref)
    assert [t["accuracy"] for t in acc["table"]] == [1.0, 1.0, pytest.approx(2 / 3), 0.75]
    assert acc["top_half"] == 1.0 and acc["bottom_half"] == 0.5


# ---------------------------------------------------------------- the report


def test_a_run_with_gold_reports_judge_corrected_and_labels_in_every_format(gold_run, tmp_path):
    doc = _report(gold_run)
    trust = doc["trust"]
    assert trust["reference"]["who"] == "gold" and trust["reference"]["labels"] == 24
    c = trust["corrected"]["unsupported"]
    assert c["labels"] == 24 and c["low"] == pytest.approx(c["corrected"]) == pytest.approx(c["high"])
    gold_rate = sum(r["gold"] == "unsupported" for r in runs.read_rows(gold_run, runs.LABELS)
                    if r["conversation_id"] == "boston") / 8
    assert 0 <= gold_rate <= 1
    assert trust["confidence_scale"] == "calibration items"
    assert trust["accuracy_at_coverage"]["n"] > 0
    assert all(w["confidence"] is None or 0 <= w["confidence"] <= 1 for w in trust["writes"])
    for fmt, needle in (("md", "Corrected rates"), ("csv", "corrected,unsupported"), ("html", "Accuracy at coverage"),
                        ("junit", "derivaudit.gates")):
        r = runner.invoke(app, ["report", str(gold_run), "--format", fmt, "--fail-if", "unsupported.upper>0.99"])
        assert r.exit_code == 0, r.output
        assert needle in r.stdout, fmt
    r = runner.invoke(app, ["report", str(gold_run), "--fail-if", "unsupported.upper>0.99"])
    assert "Corrected rates" in r.stdout and "Accuracy at coverage" in r.stdout


def test_without_reference_labels_the_report_says_how_to_get_them(gold_run, tmp_path):
    run = _copy(gold_run, tmp_path / "run")
    _strip_gold(run)
    doc = _report(run)
    assert doc["trust"]["corrected"] is None
    assert "uncorrected" in doc["trust"]["note"] and "review sample" in doc["trust"]["note"]
    assert doc["metrics"]["unsupported.corrected"] is None
    r = runner.invoke(app, ["report", str(run)])
    assert "uncorrected" in r.stdout
    # a gate on what is not known fails, and says so in JUnit
    r = runner.invoke(app, ["report", str(run), "--format", "junit", "--fail-if", "unsupported.upper>0.2"])
    assert r.exit_code == 1
    assert 'name="unsupported.upper&gt;0.2"' in r.stdout and "no value" in r.stdout


def test_trust_gates_read_judge_corrected_and_bounds(gold_run):
    doc = _report(gold_run)
    m = doc["metrics"]
    c = doc["trust"]["corrected"]["unsupported"]
    assert m["unsupported.judge"] == c["judge"] and m["unsupported.corrected"] == c["corrected"]
    assert m["unsupported.upper"] == c["high"] and m["unsupported.lower"] == c["low"]
    above = c["high"] + 0.01
    assert runner.invoke(app, ["report", str(gold_run), "--fail-if", f"unsupported.upper>{above}"]).exit_code == 0
    assert runner.invoke(app, ["report", str(gold_run), "--fail-if",
                               f"unsupported.upper>{c['high'] - 0.01}"]).exit_code == 1
    r = runner.invoke(app, ["report", str(gold_run), "--fail-if", "unsupported.uper>0.2"])
    assert r.exit_code == 2 and "unknown metric" in r.output
    r = runner.invoke(app, ["report", str(gold_run), "--format", "junit", "--fail-if", f"unsupported.judge>{2}",
                            "--fail-if", "contradicted.corrected>=0"])
    assert r.exit_code == 1
    assert r.stdout.count('classname="derivaudit.gates"') == 2 and r.stdout.count('type="gate"') == 1


def test_min_confidence_lists_only_confident_labels(gold_run, tmp_path):
    import random

    run = _copy(gold_run, tmp_path / "run")
    # the rule verifier scores +-4 only: spread its scores so that confidences differ
    rng = random.Random(0)
    prims = runs.read_rows(run, runs.PRIMITIVES)
    for p in prims:
        for who in ("A", "B"):
            sc = p[who]["scores"]
            for k in ("e", "r", "e_subset", "r_subset"):
                if sc.get(k) is not None:
                    sc[k] = round(sc[k] * rng.random(), 3)
    runs.write_rows(run, runs.PRIMITIVES, prims)
    meta = runs.load_meta(run)
    for cal in meta["calibration"].values():
        cal["scale"] = {k: {"pos": [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], "neg": [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]}
                        for k in ("e", "r")}
    runs.save_meta(run, meta)
    every = _report(run)["trust"]["writes"]
    confs = sorted(w["confidence"] for w in every if w["confidence"] is not None)
    assert len(set(confs)) > 2
    cut = confs[len(confs) // 2]
    some = _report(run, "--min-confidence", str(cut))
    assert 0 < len(some["trust"]["writes"]) < len(every)
    assert all(w["confidence"] >= cut for w in some["trust"]["writes"])
    assert some["trust"]["writes_hidden"] == len(every) - len(some["trust"]["writes"])
    assert some["scope"] == _report(run)["scope"]  # rates still count every write


# ---------------------------------------------------------------- scan --sample


def test_scan_sample_is_stratified_seeded_and_reported_for_the_store(fixtures, tmp_path):
    run = _scan(fixtures / "memories.jsonl", tmp_path / "run", sample=12, sample_seed=3)
    labels = runs.read_rows(run, runs.LABELS)
    per = {}
    for r in labels:
        per[r["conversation_id"]] = per.get(r["conversation_id"], 0) + 1
    assert per == {"boston": 4, "academy": 4, "garden": 4}
    again = _scan(fixtures / "memories.jsonl", tmp_path / "again", sample=12, sample_seed=3)
    assert [r["write_id"] for r in runs.read_rows(again, runs.LABELS)] == [r["write_id"] for r in labels]
    sel = runs.load_meta(run)["selection"]["sample"]
    assert sel["n"] == 12 and sel["seed"] == 3 and sel["store_conversations"] == {"boston": 8, "academy": 8,
                                                                                     "garden": 8}
    _strip_gold(run)
    doc = _report(run)
    s = doc["trust"]["judge_sampling"]["expanded_supported"]
    assert s["low"] <= s["judge"] <= s["high"] and s["high"] - s["low"] > 0
    assert doc["scope"]["expanded_supported"]["balanced_ci"] == [s["low"], s["high"]]
    assert doc["metrics"]["expanded_supported.upper"] == s["high"]
    assert "random sample of 12" in runner.invoke(app, ["report", str(run)]).stdout


def test_scan_sample_smaller_than_the_conversations_is_refused(fixtures, tmp_path):
    r = runner.invoke(app, ["scan", str(fixtures / "memories.jsonl"), "-o", str(tmp_path / "run"), "--sample", "2",
                            "--backend", "transformers", "--model", "smollm2"])
    assert r.exit_code == 2
    assert "--sample 2" in r.output and "at least 3" in r.output
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- review where it counts


def _fill(sheet: Path, run: Path, gold: dict[str, str] | None = None) -> str:
    """The sheet with every category filled from gold (the run's own meta.gold unless given)."""
    key = {r["review_id"]: r["write_id"] for r in runs.read_json(run, "review_writes_sample.json")["rows"]}
    gold = gold or {r["write_id"]: r["gold"] for r in runs.read_rows(run, runs.LABELS)}
    lines = sheet.read_text(encoding="utf-8-sig").splitlines(keepends=True)
    rows = list(csv.DictReader(io.StringIO("".join(x for x in lines if not x.startswith("#")))))
    for r in rows:
        r["category"] = gold[key[r["review_id"]]]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return "".join(x for x in lines if x.startswith("#")) + buf.getvalue()


def test_review_budget_to_corrected_report(gold_run, tmp_path):
    run = _copy(gold_run, tmp_path / "run")
    golds = {r["write_id"]: r["gold"] for r in runs.read_rows(run, runs.LABELS)}
    _strip_gold(run)  # the report must rest on the reviewers alone
    sheet = tmp_path / "review.csv"
    r = runner.invoke(app, ["review", "sample", str(run), "--budget", "10", "-o", str(sheet)])
    assert r.exit_code == 0, r.output
    lines = sheet.read_text(encoding="utf-8-sig").splitlines()
    assert lines[0].startswith("# derivaudit review sheet") and "at least 2 each" in " ".join(lines)
    header = next(x for x in lines if not x.startswith("#"))
    assert header.split(",") == ["review_id", "memory", "cited_passages", "earlier_history", "category",
                                 "reviewer_notes"]
    doc = runs.read_json(run, "review_writes_sample.json")
    assert len(doc["rows"]) == 10 and sum(s["drawn"] for s in doc["strata"].values()) == 10
    assert all(0 < s["inclusion"] <= 1 for s in doc["strata"].values())
    assert all(s["drawn"] >= min(2, s["size"]) for s in doc["strata"].values())
    filled = _write(tmp_path / "filled.csv", _fill(sheet, run, golds))
    r = runner.invoke(app, ["review", "import", str(run), str(filled)])
    assert r.exit_code == 0, r.output
    assert "imported 10 reviewed writes" in r.output
    rep = _report(run)
    assert rep["trust"]["reference"]["who"] == "human" and rep["trust"]["reference"]["labels"] == 10
    c = rep["trust"]["corrected"]["unsupported"]
    assert c["labels"] == 10 and c["low"] < c["high"]
    truth = sum((1 / 3) * (1 / 8) for g in golds.values() if g == "unsupported")
    assert c["low"] <= truth <= c["high"]


@pytest.fixture()
def drawn(gold_run, tmp_path) -> tuple[Path, Path, str]:
    run = _copy(gold_run, tmp_path / "run")
    sheet = tmp_path / "review.csv"
    assert runner.invoke(app, ["review", "sample", str(run), "--budget", "8", "-o", str(sheet)]).exit_code == 0
    return run, sheet, _fill(sheet, run)


def _import_fails(run: Path, path: Path, *needles: str) -> None:
    r = runner.invoke(app, ["review", "import", str(run), str(path)])
    assert r.exit_code == 2, r.output
    for n in needles:
        assert n in r.output, (n, r.output)
    assert not (run / "review_writes.jsonl").exists()


def _rewrite(text: str, edit) -> str:
    lines = text.splitlines(keepends=True)
    first = next(i for i, x in enumerate(lines) if not x.startswith("#"))
    return "".join(lines[: first + 1]) + "".join(edit(lines[first + 1:]))


def test_review_import_refuses_unknown_ids(drawn, tmp_path):
    run, _, text = drawn
    bad = tmp_path / "bad.csv"
    bad.write_text(_rewrite(text, lambda rows: [rows[0].replace(rows[0].split(",")[0], "zzzzzz-9999", 1), *rows[1:]]))
    _import_fails(run, bad, "bad.csv:", "column review_id", "zzzzzz-9999", "another review sheet")


def test_review_import_refuses_duplicated_rows(drawn, tmp_path):
    run, _, text = drawn
    bad = tmp_path / "bad.csv"
    bad.write_text(_rewrite(text, lambda rows: [*rows, rows[0]]))
    _import_fails(run, bad, "column review_id", "already given on line")


def test_review_import_refuses_categories_outside_the_four(drawn, tmp_path):
    run, _, text = drawn
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace(",unsupported,", ",mostly true,", 1) if ",unsupported," in text
                   else text.replace(",citation-supported,", ",mostly true,", 1))
    _import_fails(run, bad, "column category", "'mostly true'")


def test_review_import_refuses_another_runs_sheet(drawn, gold_run, tmp_path):
    run, _, text = drawn
    other = _copy(gold_run, tmp_path / "other")
    sheet2 = tmp_path / "other.csv"
    assert runner.invoke(app, ["review", "sample", str(other), "--budget", "9", "-o", str(sheet2)]).exit_code == 0
    _import_fails(run, _write(tmp_path / "o.csv", _fill(sheet2, other)), "another review sheet")


def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_review_import_refuses_a_sheet_whose_run_changed(drawn, tmp_path):
    run, _, text = drawn
    rows = runs.read_rows(run, runs.LABELS)
    rows[0]["expanded_label"] = "contradicted" if rows[0]["expanded_label"] != "contradicted" else "supported"
    runs.write_rows(run, runs.LABELS, rows)
    _import_fails(run, _write(tmp_path / "f.csv", text), "changed since sheet", "review sample")


def test_a_good_sheet_imports(drawn, tmp_path):
    run, _, text = drawn
    r = runner.invoke(app, ["review", "import", str(run), str(_write(tmp_path / "ok.csv", text))])
    assert r.exit_code == 0, r.output
    assert len(runs.read_rows(run, "review_writes.jsonl")) == 8


def test_export_carries_each_writes_category_and_confidence(gold_run, tmp_path):
    out = tmp_path / "labels.csv"
    assert runner.invoke(app, ["export", str(gold_run), str(out)]).exit_code == 0
    rows = list(csv.DictReader(out.open()))
    assert {"category", "confidence"} <= set(rows[0])
    assert all(r["confidence"] == "" or 0 <= float(r["confidence"]) <= 1 for r in rows)
    out = tmp_path / "obl.csv"
    assert runner.invoke(app, ["export", str(gold_run), str(out), "--level", "obligation"]).exit_code == 0
    assert "confidence" in next(csv.DictReader(out.open()))


def test_junit_carries_the_rates_as_properties(gold_run):
    r = runner.invoke(app, ["report", str(gold_run), "--format", "junit"])
    assert 'name="derivaudit.rates"' in r.stdout
    assert 'name="unsupported.corrected"' in r.stdout and 'name="unsupported.labels" value="24"' in r.stdout


def test_a_review_drawn_before_a_rescan_is_flagged(drawn, tmp_path):
    run, _, text = drawn
    assert runner.invoke(app, ["review", "import", str(run), str(_write(tmp_path / "ok.csv", text))]).exit_code == 0
    assert "scanned again" not in _report(run)["trust"]["reference"]["design"]
    rows = runs.read_rows(run, runs.LABELS)
    rows[0]["expanded_label"] = "contradicted" if rows[0]["expanded_label"] != "contradicted" else "supported"
    runs.write_rows(run, runs.LABELS, rows)
    doc = _report(run)
    design = doc["trust"]["reference"]["design"]
    assert "scanned again" in design and "review sample" in design
    assert doc["trust"]["corrected"]["unsupported"]["labels"] == 8


def test_a_store_labelled_whole_says_exact_not_a_zero_width_interval(gold_run):
    r = runner.invoke(app, ["report", str(gold_run), "--format", "md"])
    assert "exact (every write labelled)" in r.stdout
    assert "| unsupported |" in r.stdout
