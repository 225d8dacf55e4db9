"""Matched families: the builder's cells, padding size, identical distractors, controls and seeds
(no model), bad family files, and `families run` end to end on the embedded model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from derivaudit import load_log
from derivaudit.built.families import FamilyError, build, load_families, summarise
from derivaudit.cli import app
from derivaudit.runs.folder import read_jsonl

runner = CliRunner()


@pytest.fixture
def built(fixtures, tmp_path):
    build(fixtures / "families.jsonl", load_log(fixtures / "padding.jsonl"), tmp_path / "b", size=16, seed=3)
    return tmp_path / "b"


def test_every_family_gets_four_cells_and_the_controls(fixtures, built):
    fams = {f["family_id"]: f for f in load_families(fixtures / "families.jsonl")}
    assert len(fams) >= 12
    items = read_jsonl(built / "items.jsonl")
    matched: list[bool] = []
    assert len(items) == len(fams) * 2 * 5  # per evidence: valid, invalid, no_relation, 2 x swapped premises
    for fid, fam in fams.items():
        mine = [it for it in items if it["family_id"] == fid]
        assert {(it["evidence"], it["version"]) for it in mine if it["control"] is None} == {
            ("local", "valid"), ("local", "invalid"), ("distributed", "valid"), ("distributed", "invalid")}
        distractor_sets = set()
        for it in mine:
            ps = it["passages"]
            assert len(ps) == 16  # padded up to --size
            roles = [p["role"] for p in ps]
            distractor_sets.add(frozenset(p["text"] for p in ps if p["role"] == "distractor"))
            if it["control"] is None:
                assert roles.count("premise") == len(fam["premises"]) and "irrelevant" not in roles
                assert roles.count("relation") == len(fam[it["evidence"]])
                assert it["expected"] == ("accept" if it["version"] == "valid" else "reject")
            elif it["control"] == "no_relation":
                assert "relation" not in roles and roles.count("irrelevant") == len(fam[it["evidence"]])
                assert it["version"] == "valid" and it["expected"] == "reject"
            else:
                assert "premise" not in roles and roles.count("irrelevant") == len(fam["premises"])
        assert len(distractor_sets) == 1  # the same two distractors in every version of a family
        for ev in ("local", "distributed"):  # valid and invalid see the very same evidence
            v, i = [[p["text"] for p in it["passages"]] for it in mine if it["evidence"] == ev and it["control"]
                    is None]
            assert v == i
            base = next(it for it in mine if it["evidence"] == ev and it["control"] is None)
            swap = next(it for it in mine if it["evidence"] == ev and it["control"] == "swapped_premises")
            # same length and positions: only the premise slots differ
            for a, b in zip(base["passages"], swap["passages"], strict=True):
                assert (a["text"] == b["text"]) == (a["role"] != "premise")
            for control in ("no_relation", "swapped_premises"):  # each stand-in is length-matched
                ctl = next(it for it in mine if it["evidence"] == ev and it["control"] == control)
                for a, b in zip(base["passages"], ctl["passages"], strict=True):
                    if b["role"] == "irrelevant":
                        n, m = len(a["text"].split()), len(b["text"].split())
                        assert (abs(n - m) <= 0.2 * n) == b["length_matched"], (a["text"], b["text"])
                        matched.append(b["length_matched"])
        padding = {p["text"] for it in mine for p in it["passages"] if p["role"] in ("padding", "irrelevant")}
        assert padding <= {t.text for t in load_log(fixtures / "padding.jsonl").conversations["smalltalk"].turns}
    doc = json.loads((built / "build.json").read_text())
    assert doc["unmatched_controls"] == matched.count(False) and matched.count(True) >= 0.9 * len(matched)


def test_the_build_is_deterministic_under_its_seed(fixtures, built, tmp_path):
    log = load_log(fixtures / "padding.jsonl")
    build(fixtures / "families.jsonl", log, tmp_path / "again", size=16, seed=3)
    assert (tmp_path / "again" / "items.jsonl").read_bytes() == (built / "items.jsonl").read_bytes()
    build(fixtures / "families.jsonl", log, tmp_path / "other", size=16, seed=4)
    assert (tmp_path / "other" / "items.jsonl").read_bytes() != (built / "items.jsonl").read_bytes()
    build(fixtures / "families.jsonl", log, tmp_path / "small", size=10, seed=3)
    assert all(len(it["passages"]) == 10 for it in read_jsonl(tmp_path / "small" / "items.jsonl"))


def test_bad_family_files_name_line_and_field(fixtures, tmp_path):
    good = (fixtures / "families.jsonl").read_text().splitlines()[0]
    d = json.loads(good)
    bad = [dict(d, family_id="x1", relation={"local": [], "distributed": d["relation"]["distributed"]}),
           dict(d, family_id="x2", distractors=d["distractors"][:1]),
           dict(d, family_id="x3", valid=""),
           dict(d, family_id="x3")]
    p = tmp_path / "f.jsonl"
    p.write_text("\n".join([good, *map(json.dumps, bad), "{oops"]) + "\n")
    with pytest.raises(FamilyError) as e:
        load_families(p)
    text = str(e.value)
    for want in ("f.jsonl:2: relation.local", "f.jsonl:3: distractors", "f.jsonl:4: valid",
                 "f.jsonl:5: family_id", "f.jsonl:6"):
        assert want in text, text
    r = runner.invoke(app, ["families", "build", str(p), "--log", str(fixtures / "padding.jsonl"), "-o",
                            str(tmp_path / "out")])
    assert r.exit_code == 2 and "nothing was built" in r.output and not (tmp_path / "out").exists()
    r = runner.invoke(app, ["families", "build", str(fixtures / "families.jsonl"), "--log",
                            str(fixtures / "demo.jsonl"), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2 and "padding conversation" in r.output  # 10 turns cannot pad to 16


def test_summary_counts_cells_gaps_and_controls():
    rows = []
    outcomes = {"a": (True, False, False, False, False), "b": (True, True, True, False, True)}
    for fid, (v, i, nr, sv, si) in outcomes.items():
        for ev in ("local", "distributed"):
            rows += [{"family_id": fid, "evidence": ev, "version": "valid", "control": None, "view": "h",
                      "accepted": v},
                     {"family_id": fid, "evidence": ev, "version": "invalid", "control": None, "view": "h",
                      "accepted": i},
                     {"family_id": fid, "evidence": ev, "version": "valid", "control": "no_relation", "view": "h",
                      "accepted": nr},
                     {"family_id": fid, "evidence": ev, "version": "valid", "control": "swapped_premises",
                      "view": "h", "accepted": sv},
                     {"family_id": fid, "evidence": ev, "version": "invalid", "control": "swapped_premises",
                      "view": "h", "accepted": si}]
    m = summarise(rows)["h"]
    assert m["cells"]["local/valid"]["accepted"] == 1 and m["cells"]["local/invalid"]["accepted"] == 0.5
    assert m["gap"]["local"] == pytest.approx(0.5)
    assert m["controls"]["local/no_relation"]["flipped_to_reject"] == 0.5
    assert m["controls"]["distributed/swapped_premises/invalid"]["accepted"] == 0.5


@pytest.mark.slow
def test_families_run_end_to_end_on_the_embedded_model(fixtures, tmp_path):
    # 6 passages per item instead of 16: the same families and cells at about a third of the tokens
    # (the 16-passage run took 172 s of the suite on 2 AVX2 cores)
    built = tmp_path / "small"
    build(fixtures / "families.jsonl", load_log(fixtures / "padding.jsonl"), built, size=6, seed=3)
    r = runner.invoke(app, ["families", "run", str(built), "--view", "holistic", "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["families"] >= 12 and len(rep["rows"]) == len(read_jsonl(built / "items.jsonl"))
    assert all(isinstance(x["score"], float) for x in rep["rows"])
    cells = rep["summary"]["holistic"]["cells"]
    assert all(c["n"] >= 12 for c in cells.values())


def test_families_html_page(built):
    from derivaudit.report.pages import families_html

    rows = [{**{k: it[k] for k in ("family_id", "evidence", "version", "control", "expected")}, "view": "holistic",
             "score": 1.0, "accepted": it["version"] == "valid"} for it in read_jsonl(built / "items.jsonl")]
    rep = {"families": 12, "threshold": 0.0, "model": {"model": "<b>m</b>"}, "summary": summarise(rows)}
    page = families_html(rep).decode()
    assert "<svg" in page and "&lt;b&gt;m&lt;/b&gt;" in page and "View holistic" in page


def test_families_are_decided_at_the_operating_point_of_the_replay(synth_run, built, tmp_path):
    """DerivAudit §4.3 reads the families at the replay's operating point: each view's threshold is
    the one its replay would pick for a conversation held out from all of the run's, by the same
    verifier, and every version is accepted exactly when its score clears it."""
    import shutil

    from derivaudit.admission.operating import held_out_threshold
    from derivaudit.admission.replay import replayed_thresholds
    from derivaudit.built.families import run
    from derivaudit.rates.stats import clears
    from derivaudit.runs import folder as runs
    from derivaudit.runs.folder import RunError
    from tests.rule_backend import RuleBackend

    replayed = tmp_path / "replayed"
    shutil.copytree(synth_run, replayed)
    be = RuleBackend()
    with pytest.raises(RunError, match="synthetic.*rule"):  # another verifier's operating point
        replayed_thresholds(replayed, ["holistic"], be)
    doc = runs.read_json(replayed, runs.REPLAY)
    runs.write_json(replayed, runs.REPLAY, {**doc, "model": be.identity()})
    with pytest.raises(RunError, match="--view drift"):
        replayed_thresholds(replayed, ["holistic", "drift"], be)
    ops = replayed_thresholds(replayed, ["holistic"], be)
    rows = [r for r in runs.read_rows(replayed, runs.REPLAY_SCORES) if r["setting"] == "holistic/expanded"]
    assert ops["holistic"]["operating_point"] == "crossfit"
    assert ops["holistic"]["threshold"] == held_out_threshold(rows, "crossfit") != 0.0
    rep = run(built, be, ["holistic"], operating=ops)
    th = ops["holistic"]["threshold"]
    assert rep["operating_points"]["holistic"]["threshold"] == th
    assert all(r["accepted"] == clears(r["score"], th) for r in rep["rows"] if r["score"] is not None)
    r = runner.invoke(app, ["families", "run", str(built), "--view", "holistic", "--operating-point",
                            str(tmp_path / "nowhere"), "--format", "json"])
    assert r.exit_code == 2 and "replay it first" in r.output, r.output
