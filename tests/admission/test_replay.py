"""Admission replay: the seven views' wording, combining rules, operating points, the noise probe,
and an end-to-end replay of fixture writes on the real embedded model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from derivaudit import admit
from derivaudit.admission.operating import balanced_fpr, crossfit_thresholds, decide, near_binary, pick_threshold
from derivaudit.admission.replay import combine, noise_lists
from derivaudit.admission.views import VIEWS, Memory, evidence_block
from derivaudit.cli import app
from derivaudit.rates.stats import auc
from derivaudit.runs import folder as runs
from derivaudit.runs.folder import read_jsonl

from ..conftest import copy_run

runner = CliRunner()
MEM = Memory(
    "Sharon is actively building a sports academy, supported by her network.",
    [("fact", "Sharon is building a sports academy."), ("fact", "Sharon has a supportive network."),
     ("relation", "Her network supports the academy."), ("qualifier", "The building is ongoing.")],
    [("Who is building a sports academy?", "Sharon"), ("What supports the academy?", "her network")],
)
SHARED = evidence_block(MEM.record, [{"speaker": "Sharon", "text": "I aspire to establish a sports academy."},
                                     {"speaker": "Sharon", "text": "My network has been a pillar of support."}])
WORDING = {
    "holistic": ["Is the record as a whole licensed by this evidence? A record is licensed only if every claim it "
                 "makes, and every relation it asserts between claims, is supported."],
    "atomic": ["Is this claim licensed by the evidence? Judge only this claim, not the rest of the record."],
    "residual": ["Assume each listed claim is licensed.", "Is everything the record asserts beyond the listed "
                 "claims licensed by the evidence?"],
    "composition": ["Evidence that supports the claims separately does not by itself license a relation drawn "
                    "between them.", "plus whatever the record asserts to connect, modify or bind them"],
    "compact": ["written out as the claims it makes and the links it draws between them",
                "Every line above must be licensed for the record to be licensed."],
    "obligation": ["The record asserts, at minimum, each of these obligations",
                   "Considering every obligation against the evidence together: is the record licensed by the "
                   "evidence?"],
    "qa": ["Q: Who is building a sports academy? A: Sharon"],
    "qa_each": ["Q: What supports the academy? A: her network"],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_each_view_renders_app_j_wording_after_the_shared_evidence(name):
    prompts = VIEWS[name].prompts(SHARED, MEM)
    assert prompts and all(p.shared == SHARED for p in prompts)
    assert all(p.task.rstrip().endswith("Answer with one word, yes or no.") for p in prompts)
    text = "\n".join(p.task for p in prompts)
    for phrase in WORDING[name]:
        assert phrase in text
    assert "Passages" not in text and "[1]" not in text  # evidence appears once, in the shared block
    expected_parts = {"atomic": 2, "qa_each": 2}.get(name, 1)
    assert len(prompts) == expected_parts


def test_obligation_view_lists_every_obligation():
    (p,) = VIEWS["obligation"].prompts(SHARED, MEM)
    for _, t in MEM.obligations:
        assert f"- {t}" in p.task


def test_combining_rules():
    assert combine([2.0, -1.0, 0.5], "min") == -1.0
    assert combine([1.0, 3.0], "mean") == 2.0
    assert combine([0.0, 0.0], "noisy_and") == pytest.approx(math.log(0.25 / 0.75))
    assert combine([5.0], "noisy_and") == pytest.approx(5.0)
    assert combine([-40.0, 3.0], "noisy_and") < -39
    with pytest.raises(ValueError):
        combine([1.0], "max")


def test_argmax_at_zero():
    rows = [{"conversation_id": "c", "truth": False, "score": s} for s in (0.0, 1e-9, -1e-9)]
    assert decide(rows, "argmax") == "argmax"
    assert [r["decision"] for r in rows] == [False, True, False]
    assert all(r["threshold"] == 0.0 for r in rows)


def test_crossfit_never_sees_the_held_out_conversation():
    rows = []
    for conv, negs in {"A": [10.0, 11.0], "B": [-1.0, -2.0], "C": [-1.5, -3.0]}.items():
        rows += [{"conversation_id": conv, "truth": False, "score": s} for s in negs]
        rows.append({"conversation_id": conv, "truth": True, "score": 0.0})
    th = crossfit_thresholds(rows)
    assert th["A"] == math.nextafter(-1.0, math.inf)  # from B and C only; A's 11.0 would push it above 11
    assert th["B"] > 11.0 and th["C"] > 11.0  # A's negatives are held in for B and C
    used = decide(rows, "crossfit")
    assert used == "crossfit"
    a_rows = [r for r in rows if r["conversation_id"] == "A"]
    assert all(r["decision"] for r in a_rows)  # held-out A is judged by a threshold it did not set


def test_pick_threshold_and_fpr():
    negs = {"x": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]}
    t = pick_threshold(negs, 0.10)
    assert balanced_fpr(negs, t) <= 0.10 and t == math.nextafter(8.0, math.inf)
    assert pick_threshold({}, 0.1) == -math.inf
    assert balanced_fpr({"a": [1.0], "b": [0.0, 2.0]}, 1.0) == pytest.approx((1.0 + 0.5) / 2)


def test_auto_rule_and_auc():
    assert near_binary([9.0, -8.0, 7.5, -6.0, 1.0])
    assert not near_binary([0.2, -0.1, 1.0, 5.0])
    assert auc([2.0, 3.0], [1.0, 2.0]) == pytest.approx((1 + 1 + 0.5 + 1) / 4)
    assert auc([], [1.0]) is None


def test_noise_lists_are_nested_and_seeded():
    pool = [f"obligation {i}" for i in range(9)]
    a = noise_lists("w1", pool)
    assert a[0] == [] and len(a[2]) == 2 and len(a[4]) == 4 and a[2] == a[4][:2]
    assert noise_lists("w1", list(reversed(pool))) == a
    assert noise_lists("w1", pool[:3]) == {0: [], 2: noise_lists("w1", pool[:3])[2]}
    assert any(noise_lists(f"w{i}", pool)[4] != a[4] for i in range(2, 6))


# ---------------------------------------------------------------- end to end on the embedded model

@pytest.fixture(scope="module")
def run(fixture_scan, tmp_path_factory):
    """The test run's fixture scan, copied (replay writes into the run folder)."""
    return copy_run(fixture_scan[0], tmp_path_factory.mktemp("replay") / "run")


@pytest.mark.slow
def test_replay_end_to_end(run):
    r = runner.invoke(app, ["replay", str(run), "--view", "all", "--setting", "canonical", "--noise", "0,2,4",
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    expected = {f"{v}/expanded" for v in VIEWS} | {"holistic/citation_only"}
    assert set(report["settings"]) == expected
    labels = {x["write_id"]: x for x in read_jsonl(run / "labels.jsonl")}
    kept = json.loads((run / "replay.json").read_text())  # the verifier's work is kept with the results
    assert kept["usage"] == report["usage"] and kept["usage"]["prompts"] > 0
    rows = read_jsonl(run / "replay_scores.jsonl")
    assert len(rows) == len(labels) * len(expected)
    for x in rows:
        lab = labels[x["write_id"]]["expanded_label"]  # one answer key for every setting
        if x["excluded"]:
            assert x["truth"] is None
        else:
            assert x["truth"] == (lab == "supported")
            assert lab in ("supported", "unsupported", "contradicted")
        if x["score"] is not None:
            th = x["threshold"] if isinstance(x["threshold"], float) else float(x["threshold"])
            assert x["decision"] == (x["score"] >= th if report["settings"][x["setting"]]["operating_point"]
                                     == "crossfit" else x["score"] > 0)
    for m in report["settings"].values():
        assert m["n_pos"] + m["n_neg"] + sum(m["excluded"].values()) + m["scoring_errors"] == len(labels)
        for k in ("valid_kept", "unsupported_admitted"):
            assert m[k] is None or 0 <= m[k] <= 1
    assert {d["from"] for d in report["differences"]} >= {"holistic/citation_only", "holistic/expanded"}
    assert set(report["noise"]["levels"]) == {"0", "2", "4"}
    assert (run / "replay.json").exists()
    # a rerun is answered by the cache
    r2 = runner.invoke(app, ["replay", str(run), "--view", "obligation", "--format", "json"])
    again = json.loads(r2.stdout)
    assert again["usage"]["cache_misses"] == 0


def test_replay_bad_options(tmp_path):
    assert "missing" in runner.invoke(app, ["replay", str(tmp_path)]).output
    r = runner.invoke(app, ["replay", str(tmp_path), "--view", "nope"])
    assert r.exit_code == 2 and "unknown view" in r.output
    r = runner.invoke(app, ["replay", str(tmp_path), "--combine", "max"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["replay", str(tmp_path), "--noise", "a,b"])
    assert r.exit_code == 2


@pytest.mark.slow
def test_admit_library_call():
    passages = ["Alex: I accepted the job in Boston.", {"speaker": "Alex", "text": "We move to Boston next month."}]
    v = admit("Alex is moving to Boston for the new job.", passages, view="holistic", use_cache=False)
    assert isinstance(v["score"], float) and v["threshold"] == 0.0 and v["decision"] == (v["score"] > 0)
    o = admit("Alex is moving to Boston for the new job.", passages, view="obligation", use_cache=False,
              obligations=[("fact", "Alex is moving to Boston."), ("relation", "The job is the reason.")])
    assert o["obligations"] == [["fact", "Alex is moving to Boston."], ["relation", "The job is the reason."]]
    t = admit("Alex is moving to Boston for the new job.", passages, view="holistic", use_cache=False,
              threshold=v["score"])
    assert t["decision"] is True  # a fitted threshold admits at equality
    with pytest.raises(ValueError):
        admit("  ", passages)


# ---------------------------------------------------------------- fidelity on a crafted run (no model)

class ScriptedVerifier:
    """Scores a prompt by the record it names (a fixed log-odds per record; the evidence shown is
    ignored), so what replay counts is known in advance."""

    name = "scripted"

    def __init__(self, scores: dict[str, float]):
        from derivaudit.models.base import Usage

        self.scores, self.usage, self.seen = scores, Usage(), []

    def identity(self):
        return {"backend": self.name, "model": "scripted"}

    def score(self, prompts, k=100):
        from derivaudit.models.base import Score

        out = []
        for p in prompts:
            self.seen.append(p)
            (hit,) = [v for rec, v in self.scores.items() if rec in p.text]
            out.append(Score(hit))
        return out


def _crafted_run(root: Path, writes: list[dict], extra_prims: list[dict] = ()) -> Path:
    """A run folder with the files replay reads; each write: id, conv, cit/exp labels, passages
    (turn ids of the expanded view; the first one is cited), optional unresolved."""
    from derivaudit.log.io import write_jsonl

    labels, views, obls, prims = [], [], [], list(extra_prims)
    for w in writes:
        ps = [{"turn_id": t, "order": i, "speaker": "Ann", "text": f"passage {t}", "time": None, "session": None}
              for i, t in enumerate(w["turns"])]
        views.append({"write_id": w["id"], "conversation_id": w["conv"], "text": f"record {w['id']}.",
                      "citation_only": ps[:1], "expanded": ps, "search_limited": w.get("unresolved", False)})
        obls.append({"write_id": w["id"], "status": "ok", "obligations": [
            {"obligation_id": f"{w['id']}#o1", "write_id": w["id"], "kind": "fact", "subtype": None,
             "text": f"obligation of {w['id']}."}]})
        labels.append({"write_id": w["id"], "conversation_id": w["conv"], "text": f"record {w['id']}.",
                       "citation_label": w["cit"], "expanded_label": w["exp"],
                       "provenance_repaired": w["cit"] == "unsupported" and w["exp"] == "supported",
                       "unresolved": w.get("unresolved", False), "search_limited": w.get("unresolved", False),
                       "gold": w.get("gold")})
    root.mkdir(parents=True)
    write_jsonl(root / "labels.jsonl", labels)
    write_jsonl(root / "views.jsonl", views)
    write_jsonl(root / "obligations.jsonl", obls)
    write_jsonl(root / "primitives.jsonl", prims)
    return root


W = [  # two conversations; w1 and w5 are provenance-repaired (unsupported on their citation alone)
    {"id": "w1", "conv": "c1", "cit": "unsupported", "exp": "supported", "turns": ["a1", "a2"]},
    {"id": "w2", "conv": "c1", "cit": "supported", "exp": "supported", "turns": ["a1", "a3"]},
    {"id": "w3", "conv": "c1", "cit": "unsupported", "exp": "unsupported", "turns": ["a2"]},
    {"id": "w4", "conv": "c2", "cit": "ambiguous", "exp": "contradicted", "turns": ["b1"]},
    {"id": "w5", "conv": "c2", "cit": "unsupported", "exp": "supported", "turns": ["b1", "b2"]},
    {"id": "w6", "conv": "c2", "cit": "unsupported", "exp": "unsupported", "turns": ["b2"], "unresolved": True},
]


def test_every_setting_is_scored_against_the_expanded_reference(tmp_path):
    from derivaudit.admission.replay import replay

    run = _crafted_run(tmp_path / "run", W)
    be = ScriptedVerifier({f"record w{i}.": s for i, s in enumerate([0, 2.0, 3.0, -1.0, -2.0, -3.0, 1.0])})
    rep = replay(run, be, [("holistic", "citation_only"), ("holistic", "expanded")], point="argmax")
    assert rep["reference"]["view"] == "expanded" and rep["reference"]["labels"] == "model"
    rows = read_jsonl(run / "replay_scores.jsonl")
    truth = {(r["setting"], r["write_id"]): r["truth"] for r in rows}
    for setting in ("holistic/citation_only", "holistic/expanded"):
        # w1 is valid everywhere (repaired), w4 is a negative though its citation label is ambiguous,
        # w6 is excluded as unresolved in both
        assert truth[(setting, "w1")] is True and truth[(setting, "w4")] is False and truth[(setting, "w6")] is None
        m = rep["settings"][setting]
        assert (m["n_pos"], m["n_neg"], m["excluded"]["unresolved"]) == (3, 2, 1)
    # the same memories on both sides of every paired difference
    assert {d["n"] for d in rep["differences"] if d["metric"] == "valid_kept"} == {3}
    assert {d["n"] for d in rep["differences"] if d["metric"] == "unsupported_admitted"} == {2}


def test_replays_accumulate_one_setting_replacing_only_itself(tmp_path):
    from derivaudit.admission.replay import replay
    from derivaudit.runs import folder as runs

    run = _crafted_run(tmp_path / "run", W)
    scores = {f"record w{i}.": s for i, s in enumerate([0, 2.0, 3.0, -1.0, -2.0, -3.0, 1.0])}
    first = replay(run, ScriptedVerifier(scores), [("holistic", "expanded")], point="argmax")
    kept_rows = [r for r in read_jsonl(run / "replay_scores.jsonl") if r["setting"] == "holistic/expanded"]
    be = ScriptedVerifier(scores)
    rep = replay(run, be, [("obligation", "expanded")], point="argmax")
    assert list(rep["settings"]) == ["holistic/expanded", "obligation/expanded"]
    assert rep["kept"] == ["holistic/expanded"]
    assert rep["settings"]["holistic/expanded"] == first["settings"]["holistic/expanded"]
    assert all("record w" in p.text and "obligation" in p.text.lower() for p in be.seen)  # only the new view asked
    assert [r for r in read_jsonl(run / "replay_scores.jsonl") if r["setting"] == "holistic/expanded"] == kept_rows
    assert {(d["from"], d["to"]) for d in rep["differences"]} == {("holistic/expanded", "obligation/expanded")}
    # the same setting again replaces itself (new scores), the other stays
    rep = replay(run, ScriptedVerifier({k: -v for k, v in scores.items()}), [("holistic", "expanded")],
                 point="argmax")
    assert list(rep["settings"]) == ["holistic/expanded", "obligation/expanded"]
    rows = read_jsonl(run / "replay_scores.jsonl")
    assert len(rows) == 2 * len(W)
    assert [r["score"] for r in rows if r["setting"] == "holistic/expanded"] == [-r["score"] for r in kept_rows]
    # another verifier is refused, naming both; --fresh replaces every earlier replay

    class Other(ScriptedVerifier):
        def identity(self):
            return {"backend": self.name, "model": "another"}

    with pytest.raises(runs.RunError, match="replays by scripted, and this verifier is another.*--fresh"):
        replay(run, Other(scores), [("holistic", "citation_only")], point="argmax")
    rep = replay(run, Other(scores), [("holistic", "citation_only")], point="argmax", fresh=True)
    assert list(rep["settings"]) == ["holistic/citation_only"] and rep["kept"] == []


def test_earlier_replays_of_a_run_scanned_again_are_dropped_and_said(tmp_path):
    from derivaudit.admission.replay import replay
    from derivaudit.log.io import write_jsonl

    run = _crafted_run(tmp_path / "run", W)
    scores = {f"record w{i}.": s for i, s in enumerate([0, 2.0, 3.0, -1.0, -2.0, -3.0, 1.0])}
    replay(run, ScriptedVerifier(scores), [("holistic", "expanded")], point="argmax")
    obls = read_jsonl(run / "obligations.jsonl")
    obls[0]["obligations"][0]["text"] = "another obligation."  # as a new scan would write it
    write_jsonl(run / "obligations.jsonl", obls)
    rep = replay(run, ScriptedVerifier(scores), [("obligation", "expanded")], point="argmax")
    assert rep["dropped"] == ["holistic/expanded"] and list(rep["settings"]) == ["obligation/expanded"]
    assert {r["setting"] for r in read_jsonl(run / "replay_scores.jsonl")} == {"obligation/expanded"}


def test_a_kept_replay_follows_the_new_answer_key(tmp_path):
    from derivaudit.admission.replay import replay

    gold = [{**w, "gold": "unsupported"} for w in W]
    run = _crafted_run(tmp_path / "run", gold)
    scores = {f"record w{i}.": s for i, s in enumerate([0, 2.0, 3.0, -1.0, -2.0, -3.0, 1.0])}
    replay(run, ScriptedVerifier(scores), [("holistic", "expanded")], point="argmax")
    rep = replay(run, ScriptedVerifier(scores), [("holistic", "citation_only")], point="argmax", reference="gold")
    kept = rep["settings"]["holistic/expanded"]
    assert kept["n_pos"] == 0 and kept["n_neg"] == rep["settings"]["holistic/citation_only"]["n_neg"]


def test_auto_picks_one_operating_point_for_all_settings_of_a_verifier(tmp_path):
    from derivaudit.admission.replay import replay

    run = _crafted_run(tmp_path / "run", W)
    # every score is near-binary (|log-odds| >= 4.6) except w1's and w2's citation-only prompts
    # (passage a1 alone): 10 of 12 scores overall (argmax), but only 4 of 6 in citation_only, which
    # decided alone would go to crossfit
    class ByView(ScriptedVerifier):
        def score(self, prompts, k=100):
            from derivaudit.models.base import Score

            out = []
            for p in prompts:
                cit = "passage a2" not in p.text and "passage a3" not in p.text and "passage b2" not in p.text
                rec = next(r for r in self.scores if r in p.text)
                out.append(Score(0.5 if cit and rec in ("record w1.", "record w2.", "record w3.") else
                                 self.scores[rec]))
            return out

    be = ByView({f"record w{i}.": s for i, s in enumerate([0, 6.0, 6.0, -6.0, -6.0, 6.0, -6.0])})
    rep = replay(run, be, [("holistic", "citation_only"), ("holistic", "expanded")], point="auto")
    assert rep["operating_point_used"] == "argmax"
    assert {m["operating_point"] for m in rep["settings"].values()} == {"argmax"}


def test_noise_probe_adds_only_obligations_supported_by_the_memorys_own_evidence(tmp_path):
    from derivaudit.admission.replay import replay

    writes = [{"id": f"n{i}", "conv": "c1", "cit": "supported", "exp": "supported", "turns": t}
              for i, t in enumerate([["x1", "x2", "x3"], ["x1"], ["x2"], ["x3"], ["x9"], ["x1", "x9"]])]
    prims = []
    for w in writes:  # each write's obligation is supported on its own first passage
        prims.append({"obligation_id": f"{w['id']}#o1", "write_id": w["id"], "conversation_id": "c1",
                      "view": "expanded", "passages": w["turns"], "label": "supported",
                      "A": {"e_subset": [1]}, "adjudicator": None})
    run = _crafted_run(tmp_path / "run", writes, prims)
    be = ScriptedVerifier({f"record n{i}.": 5.0 for i in range(6)})
    rep = replay(run, be, [("obligation", "expanded")], point="argmax", noise=[0, 2])
    nz = rep["noise"]
    # n0 sees x1..x3: the obligations of n1 (x1), n2 (x2), n3 (x3) and n5 (x1) are supported by its
    # evidence, n4's (x9) is not; n1 sees x1: n0 and n5; n5 sees x1 and x9: n0, n1 and n4. n2, n3
    # and n4 have none (the others' implying passage is x1).
    assert nz["eligible"] == {"0": 6, "2": 3} and nz["writes"] == 3 and nz["candidates"] == 6
    assert "fewer than 2" in nz["why_not"]["2"]
    added = [p.task for p in be.seen if "record n0." in p.text and p.task.count("- ") > 1]
    assert added and all("obligation of n4." not in t for t in added)


def test_the_answer_key_can_be_gold_or_human(tmp_path):
    from derivaudit.admission.replay import replay

    gold = {"w1": "provenance-repaired", "w2": "unsupported", "w3": "citation-supported", "w4": "ambiguous"}
    run = _crafted_run(tmp_path / "run", [{**w, "gold": gold.get(w["id"])} for w in W])
    be = ScriptedVerifier({f"record w{i}.": s for i, s in enumerate([0, 2.0, 3.0, -1.0, -2.0, -3.0, 1.0])})
    rep = replay(run, be, [("holistic", "expanded")], point="argmax", reference="gold")
    assert rep["reference"]["labels"] == "gold"
    truth = {r["write_id"]: (r["truth"], r["excluded"]) for r in read_jsonl(run / "replay_scores.jsonl")}
    assert truth == {"w1": (True, None), "w2": (False, None), "w3": (True, None), "w4": (None, "ambiguous"),
                     "w5": (None, "no gold"), "w6": (None, "no gold")}
    with pytest.raises(ValueError, match="review import"):
        replay(run, be, [("holistic", "expanded")], reference="human")
    runs.write_rows(run, runs.REVIEW, [  # a reviewer calls w3 supported (the model: unsupported)
        {"review_id": "r1", "obligation_id": "w3#o1", "write_id": "w3", "view": "expanded", "stratum": "x",
         "d": True, "e": True, "r": False, "label": "supported"}])
    prims = [{"obligation_id": f"{w['id']}#o1", "write_id": w["id"], "conversation_id": w["conv"],
              "view": "expanded", "passages": w["turns"], "label": "supported", "A": {"e_subset": [1]},
              "adjudicator": None} for w in W]
    runs.write_rows(run, runs.PRIMITIVES, prims)
    rep = replay(run, be, [("holistic", "expanded")], point="argmax", reference="human")
    truth = {r["write_id"]: (r["truth"], r["excluded"]) for r in read_jsonl(run / "replay_scores.jsonl")}
    assert truth["w3"] == (True, None) and truth["w1"] == (None, "not reviewed")
    assert rep["settings"]["holistic/expanded"]["excluded"]["not reviewed"] == 5


def test_a_view_declares_whether_it_reads_obligations_and_qa():
    """gate and families decompose a record only for views that declare it: a view that does not
    renders the same prompts with or without obligations (and likewise for QA pairs)."""
    bare = Memory("Alex moved to Boston for a job.")
    full = Memory(bare.record, [("fact", "Alex moved to Boston."), ("relation", "The move was for a job.")],
                  [("Where did Alex move?", "Boston")])
    for name in VIEWS:
        v = VIEWS[name]
        no_ob = Memory(bare.record, (), full.qa)
        assert (v.prompts("E", full) != v.prompts("E", no_ob)) == v.needs_obligations, name
        no_qa = Memory(bare.record, full.obligations, ())
        assert (v.prompts("E", full) != v.prompts("E", no_qa)) == v.needs_qa, name
