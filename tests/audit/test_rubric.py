"""Rubric stability: annotator A's primitives asked again in the other wording, compared with its
original answers (a rule verifier that reads the wording makes the disagreement known)."""

from __future__ import annotations

import pytest

from derivaudit import load_log
from derivaudit.audit.annotate import Annotator
from derivaudit.audit.scan import ScanConfig, scan
from derivaudit.runs.folder import read_jsonl

from ..rule_backend import RuleBackend


class WordingSensitive(RuleBackend):
    """Answers E = no whenever the question is asked in wording b ("establish that the claim")."""

    def score(self, prompts, k=100):
        out = super().score(prompts, k)
        for i, p in enumerate(prompts):
            if "establish that the claim is true" in p.task:
                out[i] = type(out[i])(-4.0, -4.1, -0.1)
            typed = "B" if "classify the claim" in p.task else "A" if "Which label fits" in p.task else None
            if typed:
                # the typed label: "supported" (A) in wording a, "insufficient" (B) in wording b, except
                # for an obligation about Boston, which both wordings call supported
                want = "A" if "Boston" in p.task else typed
                out[i] = type(out[i])(3.0 if p.verdict[0] == (want,) else -3.0, -0.1, -3.1)
        return out


def test_rubric_b_reruns_annotator_a_in_the_other_wording_and_reports_agreement(fixtures, tmp_path):
    log = load_log(fixtures / "memories.jsonl")
    be = WordingSensitive("1, 2")  # the first two passages: boston-1 is implied by both
    annotators = (Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a"))
    cfg = ScanConfig(limit=4, rubric="b", calibrate=False)
    report = scan(log, tmp_path / "run", annotators, cfg=cfg)
    rub = report["rubric"]
    assert (rub["annotator"], rub["original"], rub["wording"]) == ("A", "a", "b")
    prims = read_jsonl(tmp_path / "run" / "primitives.jsonl")
    rows = read_jsonl(tmp_path / "run" / "rubric_b.jsonl")
    assert len(rows) == len(prims) == rub["items"] and all(r["wording"] == "b" for r in rows)
    assert not any(r["e"] for r in rows)  # wording b never establishes anything for this verifier
    # hand computation from the two files
    orig = {(p["obligation_id"], p["view"]): p["A"] for p in prims}
    e_same = [orig[(r["obligation_id"], r["view"])]["e"] == r["e"] for r in rows]
    assert rub["primitives"]["E"]["agreement"] == pytest.approx(sum(e_same) / len(e_same))
    assert any(o["e"] for o in orig.values()) and rub["primitives"]["E"]["agreement"] < 1
    d_same = [orig[(r["obligation_id"], r["view"])]["d"] == r["d"] for r in rows]
    assert rub["primitives"]["D"]["agreement"] == pytest.approx(sum(d_same) / len(d_same))
    # the typed-label baseline, asked in both wordings on the same items
    assert {r["typed_original"] for r in rows} <= {"supported"} and {r["typed"] for r in rows} >= {"insufficient"}
    typed_same = [r["typed"] == r["typed_original"] for r in rows]
    assert 0 < sum(typed_same) < len(rows)
    assert rub["typed"] == {"n": len(rows), "agreement": pytest.approx(sum(typed_same) / len(rows)),
                            "kappa": pytest.approx(rub["typed"]["kappa"])}
    assert (tmp_path / "run" / "rubric.json").exists()
    with pytest.raises(ValueError, match="already uses wording a"):
        scan(log, tmp_path / "run", annotators, cfg=ScanConfig(limit=4, rubric="a", calibrate=False))
