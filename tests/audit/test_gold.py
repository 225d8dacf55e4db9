"""Label accuracy against meta.gold: the mapping, the numbers by hand, every report format, gates."""

import json

import pytest
from typer.testing import CliRunner

from derivaudit import report
from derivaudit.audit.gold import category, flat, gold_metrics
from derivaudit.cli import app
from derivaudit.runs import folder as runs

runner = CliRunner()


def test_category_from_the_two_view_labels():
    assert category("supported", "supported") == "citation-supported"
    assert category("unsupported", "supported") == "provenance-repaired"
    assert category("ambiguous", "supported") == "ambiguous"  # repaired from insufficient citations only
    assert category("contradicted", "supported") == "ambiguous"
    assert category("supported", "unsupported") == "unsupported"
    assert category("unsupported", "contradicted") == "contradicted"
    assert category("supported", "ambiguous") == "ambiguous"
    assert category(None, None) == "ambiguous"


ROWS = [  # gold, audited
    ("citation-supported", "citation-supported"), ("citation-supported", "provenance-repaired"),
    ("provenance-repaired", "provenance-repaired"), ("unsupported", "unsupported"),
    ("unsupported", "ambiguous"), ("unsupported", "unsupported"), ("contradicted", "unsupported"),
    ("ambiguous", "citation-supported"), (None, "unsupported"),
]


def _rows():
    return [{"write_id": f"w{i}", "gold": g, "category": p} for i, (g, p) in enumerate(ROWS)]


def test_metrics_by_hand():
    g = gold_metrics(_rows())
    assert g["n"] == 7 and g["correct"] == 4 and g["accuracy"] == pytest.approx(4 / 7)
    assert g["ambiguous"] == pytest.approx(1 / 7)
    assert g["recall"] == {"citation-supported": 0.5, "provenance-repaired": 1.0, "unsupported": pytest.approx(2 / 3),
                           "contradicted": 0.0}
    assert g["confusion"]["unsupported"] == {"citation-supported": 0, "provenance-repaired": 0, "unsupported": 2,
                                             "contradicted": 0, "ambiguous": 1}
    assert g["confusion"]["contradicted"]["unsupported"] == 1
    assert g["baseline"] == {"category": "unsupported", "accuracy": pytest.approx(3 / 7)}
    assert g["gold_ambiguous"] == 1
    # kappa: po = 4/7; gold marginals cs 2, pr 1, un 3, co 1; audited cs 1, pr 2, un 3, amb 1
    pe = (2 * 1 + 1 * 2 + 3 * 3) / 49
    assert g["kappa"] == pytest.approx((4 / 7 - pe) / (1 - pe))
    assert {e["write_id"] for e in g["errors"]} == {"w1", "w4", "w6"}
    f = flat(g)
    assert f["gold.accuracy"] == g["accuracy"] and f["gold.recall.provenance_repaired"] == 1.0


def test_false_supported_counts_either_view_and_has_an_upper_bound():
    rows = [{"write_id": "a", "conversation_id": "c1", "gold": "unsupported", "citation_label": "supported",
             "expanded_label": "unsupported", "category": "unsupported"},  # right category, still admitted
            {"write_id": "b", "conversation_id": "c1", "gold": "contradicted", "citation_label": "unsupported",
             "expanded_label": "supported", "category": "provenance-repaired"},
            {"write_id": "c", "conversation_id": "c2", "gold": "unsupported", "citation_label": "unsupported",
             "expanded_label": "unsupported", "category": "unsupported"},
            {"write_id": "d", "conversation_id": "c2", "gold": "citation-supported", "citation_label": "supported",
             "expanded_label": "supported", "category": "citation-supported"}]
    g = gold_metrics(rows)
    fs = g["false_supported"]
    assert (fs["n"], fs["count"], fs["write_ids"]) == (3, 2, ["a", "b"]) and fs["share"] == pytest.approx(2 / 3)
    # Wilson one-sided 95% upper bound, by hand: z = 1.6449
    z, n, p = 1.6449, 3, 2 / 3
    hand = (p + z * z / (2 * n) + z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5)) / (1 + z * z / n)
    assert fs["upper95"] == pytest.approx(hand) and fs["upper95"] < 1
    assert g["per_conversation"] == {"c1": {"n": 2, "correct": 1, "accuracy": 0.5},
                                     "c2": {"n": 2, "correct": 2, "accuracy": 1.0}}
    assert flat(g)["gold.false_supported"] == pytest.approx(2 / 3)
    clean = gold_metrics([rows[2]])
    assert clean["false_supported"]["share"] == 0 and 0.4 < clean["false_supported"]["upper95"] < 0.8  # 0 of 1


def test_no_gold_no_numbers():
    assert gold_metrics([{"write_id": "w", "category": "unsupported"}]) is None
    assert set(flat(None).values()) == {None}


def _gold_run(src, dst):
    import shutil

    shutil.copytree(src, dst)
    labels = runs.read_rows(dst, runs.LABELS)
    for i, r in enumerate(labels):
        r["category"] = category(r["citation_label"], r["expanded_label"])
        r["gold"] = r["category"] if i % 3 else "contradicted"  # a third of them wrong
    runs.write_rows(dst, runs.LABELS, labels)
    return dst, labels


def test_every_format_shows_gold_and_gates_read_it(synth_run, tmp_path):
    run, labels = _gold_run(synth_run, tmp_path / "run")
    doc = report.build(run)
    doc["gates"] = []
    report.validate(doc)
    g = doc["gold"]
    assert g["n"] == sum(r["gold"] != "ambiguous" for r in labels) and g["gold_ambiguous"] > 0
    assert doc["metrics"]["gold.accuracy"] == g["accuracy"] < 1
    md = report.render(doc, "md").decode()
    assert "Labels against gold" in md and "gold ↓ / audited →" in md
    assert "gold,gold.accuracy" in report.render(doc, "csv").decode()
    assert "Labels against gold" in report.render(doc, "html").decode()
    r = runner.invoke(app, ["report", str(run)])
    assert r.exit_code == 0 and "Labels against gold" in r.stdout and "Confusion matrix" in r.stdout
    acc = g["accuracy"]
    assert runner.invoke(app, ["report", str(run), "--fail-if", f"gold.accuracy<{acc - 0.01}"]).exit_code == 0
    r = runner.invoke(app, ["report", str(run), "--fail-if", f"gold.accuracy<{acc + 0.01}", "--format", "json"])
    assert r.exit_code == 1 and json.loads(r.stdout)["gates"][0]["failed"]
    assert runner.invoke(app, ["report", str(run), "--fail-if", "gold.recall.contradicted<0"]).exit_code == 0
    assert runner.invoke(app, ["report", str(run), "--fail-if", "gold.recall.bogus<0"]).exit_code == 2
    fs = g["false_supported"]
    assert fs["count"] > 0 and "false supported" in md  # a third of the writes carry a wrong 'contradicted'
    gate = f"gold.false_supported>{fs['share'] - 0.01}"
    assert runner.invoke(app, ["report", str(run), "--fail-if", gate]).exit_code == 1
    assert runner.invoke(app, ["report", str(run), "--fail-if", "gold.false_supported>1"]).exit_code == 0


def test_a_run_without_gold_shows_no_gold_section(synth_run):
    doc = report.build(synth_run)
    assert doc["gold"] is None
    assert "Labels against gold" not in report.render(doc, "md").decode()
    assert "Labels against gold" not in report.render(doc, "html").decode()
    assert "gold." not in report.render(doc, "csv").decode()
    r = runner.invoke(app, ["report", str(synth_run)])
    assert r.exit_code == 0 and "gold" not in r.stdout.lower()
    assert runner.invoke(app, ["report", str(synth_run), "--fail-if", "gold.accuracy<0.5"]).exit_code == 1


@pytest.mark.parametrize("cit", ["unsupported", "contradicted", "ambiguous"])
def test_provenance_repaired_is_one_rule_for_category_and_flag(cit):
    """DerivAudit §3.1: insufficiently supported by its citations (unsupported), supported after
    expansion; contradicted or ambiguous citations are not that, and are counted apart."""
    from derivaudit.audit.gold import provenance_repaired
    from derivaudit.rates.stats import rates

    repaired = cit == "unsupported"
    assert provenance_repaired(cit, "supported") is repaired
    assert category(cit, "supported") == ("provenance-repaired" if repaired else "ambiguous")
    assert not provenance_repaired("supported", "supported")
    assert category("supported", "supported") == "citation-supported"
    assert not provenance_repaired(cit, "unsupported")
    row = {"conversation_id": "c", "citation_label": cit, "expanded_label": "supported", "search_limited": False,
           "multi_passage": False}
    r = rates([row])
    assert (r["provenance_repaired"]["weighted"], r["provenance_repaired_other"]["weighted"]) == (
        (1.0, None) if repaired else (None, 1.0))
