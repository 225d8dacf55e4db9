"""scan end to end on fixture writes with the real embedded model: structure and invariants, resume,
export. Not the model's quality: SmolLM2-135M is near chance."""

from __future__ import annotations

import csv
import json
import shutil

import orjson
import pytest
from typer.testing import CliRunner

from derivaudit.cli import app
from derivaudit.runs import folder as runs
from derivaudit.runs.folder import read_jsonl

from ..conftest import SCAN_ARGS, SCAN_INPUTS, SCAN_LIMIT, copy_run

runner = CliRunner()
N = SCAN_LIMIT


@pytest.fixture(scope="module")
def scanned(fixture_scan, tmp_path_factory):
    """The test run's fixture scan, copied (these tests rescan and damage it)."""
    run, report = fixture_scan
    return copy_run(run, tmp_path_factory.mktemp("scan") / "run"), report


def rescan(out):
    return runner.invoke(app, ["scan", *SCAN_ARGS, "-o", str(out), "--format", "json"])


@pytest.mark.slow
def test_scan_files_and_invariants(scanned):
    run, report = scanned
    for name in ("meta.json", "views.jsonl", "obligations.jsonl", "primitives.jsonl", "labels.jsonl", "scope.json"):
        assert (run / name).exists(), name
    assert not list(run.glob("*.partial.jsonl"))
    # the slot check says whether it was used and, if not, why (SmolLM2 cannot separate its S items)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["slot_check"] == report["slot_check"] and report["slot_check"].startswith(("on", "off: "))
    if report["slot_check"] != "on":
        assert all(p[w] is None or p[w]["s"] is None for p in read_jsonl(run / "primitives.jsonl")
                   for w in ("A", "B", "adjudicator"))
    labels = read_jsonl(run / "labels.jsonl")
    assert len(labels) == N
    allowed = {"supported", "unsupported", "contradicted", "ambiguous"}
    views = {r["write_id"]: r for r in read_jsonl(run / "views.jsonl")}
    for r in labels:
        assert r["citation_label"] in allowed and r["expanded_label"] in allowed
        if r["provenance_repaired"]:
            assert r["citation_label"] != "supported" and r["expanded_label"] == "supported"
        assert r["provenance_repaired"] == (r["category"] == "provenance-repaired")  # one definition
        if r["unresolved"]:
            assert r["search_limited"] and r["expanded_label"] == "unsupported"
        assert r["search_limited"] == views[r["write_id"]]["search_limited"]
    prims = read_jsonl(run / "primitives.jsonl")
    obligations = {o["obligation_id"] for d in read_jsonl(run / "obligations.jsonl") for o in d["obligations"]}
    assert {p["obligation_id"] for p in prims} == obligations
    for p in prims:
        n = len(p["passages"])
        for who in ("A", "B", "adjudicator"):
            if p[who]:
                assert all(1 <= k <= n for k in p[who]["e_subset"] + p[who]["r_subset"])
        assert p["adjudicated"] == (p["adjudicator"] is not None)
        assert p["adjudicated"] == ((p["A"]["d"], p["A"]["e"], p["A"]["r"]) != (p["B"]["d"], p["B"]["e"], p["B"]["r"]))
    assert {(p["write_id"], p["view"]) for p in prims} == {(r["write_id"], v) for r in labels
                                                           for v in ("citation_only", "expanded")}
    # a checked refutation answers every view holding its passages (labels.carry_across_views)
    by_obl: dict[str, list[dict]] = {}
    for p in prims:
        by_obl.setdefault(p["obligation_id"], []).append(p)
    for rows in by_obl.values():
        for row in rows:
            fin = row.get("settled") or row["adjudicator"] or row["A"]
            for other in rows:
                ofin = other.get("settled") or other["adjudicator"] or other["A"]
                for w in ("r",):
                    turns = {other["passages"][k - 1] for k in ofin[f"{w}_subset"]} if ofin[w] else set()
                    if turns and turns <= set(row["passages"]) and fin[w] is False:
                        assert row["carried"][w]["passages"] == sorted(turns, key=other["passages"].index)
    by_write = {r["write_id"]: r for r in labels}
    for p in prims:  # the memory labels are read from the carried obligation labels
        assert by_write[p["write_id"]][p["view"]]["obligations"][p["obligation_id"]] == p["label"]
    scope = report["scope"]
    for m in scope.values():
        for k in ("balanced", "weighted"):
            assert m[k] is None or 0.0 <= m[k] <= 1.0
    assert report["agreement"]["items"] == len(prims)
    gold = report["gold"]  # the gold fixture writes carry meta.gold, so the scope report scores them
    graded = [r for r in labels if r["gold"]]
    assert 0 < len(graded) < N  # the hostile writes carry none
    assert gold["n"] == len(graded) == sum(map(sum, (row.values() for row in gold["confusion"].values())))
    assert all(r["category"] for r in labels)
    assert report["run"]["judged_by"]["A"].endswith("(transformers)")
    meta = orjson.loads((run / "meta.json").read_bytes())
    assert set(meta["stages"]) == {"views", "obligations", "primitives", "labels"}


@pytest.mark.slow
def test_rerun_is_free_and_identical(scanned):
    run, report = scanned
    r = rescan(run)
    assert r.exit_code == 0
    again = json.loads(r.stdout)
    assert again["scope"] == report["scope"]


@pytest.mark.slow
def test_resume_after_interruption(scanned, tmp_path):
    run, report = scanned
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    meta = orjson.loads((copy / "meta.json").read_bytes())
    fp = meta["stages"].pop("primitives")
    runs.save_meta(copy, meta)
    rows = read_jsonl(copy / "primitives.jsonl")
    first = rows[0]["write_id"]
    done = [r for r in rows if r["write_id"] == first]
    done[-1]["_last"] = True
    (copy / "primitives.jsonl").unlink()
    with (copy / "primitives.partial.jsonl").open("wb") as fh:  # as an interrupted run leaves it
        fh.write(orjson.dumps({"_fingerprint": fp}) + b"\n")
        fh.write(b"".join(orjson.dumps(r) + b"\n" for r in done))
        fh.write(b'{"obligation_id": "cut')
    r = rescan(copy)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["scope"] == report["scope"]
    assert read_jsonl(copy / "primitives.jsonl") == read_jsonl(run / "primitives.jsonl")


@pytest.mark.slow
def test_export_csv(scanned, tmp_path):
    run, _ = scanned
    out = tmp_path / "labels.csv"
    r = runner.invoke(app, ["export", str(run), str(out)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2 * N
    assert {"write_id", "text", "view", "label", "citations"} <= set(rows[0])
    out2 = tmp_path / "obl.csv"
    assert runner.invoke(app, ["export", str(run), str(out2), "--level", "obligation"]).exit_code == 0
    orows = list(csv.DictReader(out2.open()))
    assert {"A_D", "A_E", "A_R", "A_S", "A_E_turns", "B_D", "adjudicator_D", "label", "obligation"} <= set(orows[0])
    assert {"E_turns", "R_turns"} <= set(rows[0])
    r = runner.invoke(app, ["export", str(tmp_path / "nope"), str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and "missing" in r.output


def test_scan_bad_input(tmp_path):
    from pathlib import Path

    bad = Path(__file__).resolve().parents[2] / "fixtures" / "malformed.jsonl"
    r = runner.invoke(app, ["scan", str(bad), "-o", str(tmp_path / "r")])
    assert r.exit_code == 2 and not (tmp_path / "r").exists()
    good = Path(__file__).resolve().parents[2] / "fixtures" / "memories.jsonl"
    r = runner.invoke(app, ["scan", str(good), "-o", str(tmp_path / "r"), "--conversation", "nope"])
    assert r.exit_code == 2 and "unknown conversation" in r.output


@pytest.mark.slow
def test_stage_commands(tmp_path, fixture_scan):
    # the inputs of the suite's one model scan: the stages' model answers are the scan's, from the
    # run's result cache (the stage plumbing is what is tested here, not the model)
    run = tmp_path / "run"
    args = [*SCAN_ARGS[: len(SCAN_INPUTS)], "--limit", "2", *SCAN_ARGS[len(SCAN_INPUTS) + 2:]]  # same calibration
    r = runner.invoke(app, ["scan", *args, "-o", str(run), "--until", "views"])
    assert r.exit_code == 0, r.output
    assert (run / "views.jsonl").exists() and not (run / "obligations.jsonl").exists()
    r = runner.invoke(app, ["decompose", str(run)])
    assert r.exit_code == 0, r.output
    assert len(read_jsonl(run / "obligations.jsonl")) == 2 and not (run / "primitives.jsonl").exists()
    r = runner.invoke(app, ["annotate", str(run), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["run"]["writes"] == 2
    assert len(read_jsonl(run / "labels.jsonl")) == 2
    r = runner.invoke(app, ["annotate", str(tmp_path)])
    assert r.exit_code == 2 and "not a run folder" in r.output


def test_scan_config_round_trips_and_reads_old_option_dicts():
    from derivaudit.audit.evidence import EvidenceSettings
    from derivaudit.audit.scan import ScanConfig
    from derivaudit.models import ModelRoles, ModelSpec

    cfg = ScanConfig(evidence=EvidenceSettings(limit_floor=0.7), limit=3, conversations=["c"],
                     models=ModelRoles(ModelSpec(), {"adjudicator": ModelSpec("openai", "j", ("http://h/v1",))}),
                     files=["/x/log.jsonl"], use_cache=False)
    back = ScanConfig.from_meta({"config": cfg.to_dict()}, "primitives")
    assert back.to_dict() == cfg.to_dict() and back.until == "primitives"
    old = {"files": ["/x/log.jsonl"], "history": [], "limit": 2, "conversation": None, "backend": "transformers",
           "model": "smollm2", "base_url": None, "top_logprobs": None, "backend_b": None, "model_b": "b.gguf",
           "adjudicator_backend": None, "adjudicator_model": None, "limit_floor": 0.5, "no_cache": True,
           "skip_invalid": False}
    legacy = ScanConfig.from_meta({"cli": old})
    assert legacy.limit == 2 and not legacy.use_cache
    assert legacy.models.spec("annotator_b") == ModelSpec("transformers", "b.gguf")
    assert legacy.models.spec("adjudicator") == ModelSpec()
    assert ScanConfig.from_meta({}) is None
    with pytest.raises(ValueError, match="--until"):
        ScanConfig(until="everything")


def test_a_write_insufficient_after_a_capped_search_is_unresolved_and_replay_excludes_it(tmp_path):
    """Known input, no model: 30 turns about the orchard (more relevant turns than the retrieval
    cap of 12) and a write nothing in them supports; the same write over a conversation where the
    cap is not reached is plainly unsupported."""
    from derivaudit import build_views
    from derivaudit.admission.replay import load_cases
    from derivaudit.audit.annotate import Annotator, Item, annotate
    from derivaudit.audit.decompose import Decomposition, Obligation
    from derivaudit.audit.scope import _primitive_row, label_writes
    from derivaudit.log.io import check_rows, write_jsonl

    from ..rule_backend import RuleBackend

    rows = [{"type": "turn", "conversation_id": c, "turn_id": f"{c}{i}", "order": i, "speaker": "Ann",
             "text": f"apple orchard visit number {i}" if c == "capped" or i < 3 else f"weather talk {i}"}
            for c in ("capped", "open") for i in range(30)]
    rows += [{"type": "write", "write_id": f"w-{c}", "conversation_id": c, "text": "Ann sold the apple orchard",
              "citations": [f"{c}0"], "last_seen_turn": f"{c}29"} for c in ("capped", "open")]
    log, problems = check_rows("mem", rows)
    assert not problems
    views = list(build_views(log))
    assert {v.write.write_id: v.search_limited for v in views} == {"w-capped": True, "w-open": False}
    decs = [Decomposition(w.write_id, [Obligation(f"{w.write_id}#o1", w.write_id, "fact", None, w.text)], "ok")
            for w in log.writes]
    items = [Item(d.obligations[0], v.write, vn, getattr(v, vn)) for d, v in zip(decs, views, strict=True)
             for vn in ("citation_only", "expanded")]
    be = RuleBackend("1")
    anns = annotate(items, Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a"))
    labels = {r["write_id"]: r for r in label_writes(log.writes, views, decs, [_primitive_row(x) for x in anns])}
    assert labels["w-capped"]["expanded_label"] == labels["w-open"]["expanded_label"] == "unsupported"
    assert labels["w-capped"]["unresolved"] is True and labels["w-open"]["unresolved"] is False
    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(run / "labels.jsonl", list(labels.values()))
    write_jsonl(run / "views.jsonl", [v.to_dict() for v in views])
    write_jsonl(run / "obligations.jsonl", [d.to_dict() for d in decs])
    for ev in ("citation_only", "expanded"):
        cases = {c.write_id: c for c in load_cases(run, ev)}
        assert cases["w-capped"].truth is None and cases["w-capped"].excluded == "unresolved"
        assert cases["w-open"].truth is False


@pytest.mark.slow
def test_a_damaged_stage_file_is_redone_and_said(scanned, tmp_path):
    run, report = scanned
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    p = copy / "obligations.jsonl"
    p.write_bytes(p.read_bytes()[:-30])  # cut mid-line, as a full disk or a careless edit leaves it
    r = rescan(copy)
    assert r.exit_code == 0, r.output
    assert "redoing the obligations stage" in r.output and "obligations.jsonl" in r.output
    assert read_jsonl(copy / "obligations.jsonl") == read_jsonl(run / "obligations.jsonl")
    assert json.loads(r.stdout)["scope"] == report["scope"]


def test_a_run_folder_in_use_is_refused_naming_the_holder(tmp_path):
    import os
    from pathlib import Path

    log = Path(__file__).resolve().parents[2] / "fixtures" / "demo.jsonl"
    (tmp_path / "run").mkdir()
    with runs.lock(tmp_path / "run"):
        r = runner.invoke(app, ["scan", str(log), "-o", str(tmp_path / "run"), "--backend", "llamacpp",
                                "--model", "smollm2"])
    assert r.exit_code == 2 and f"in use by another derivaudit (pid {os.getpid()})" in r.output
    assert not (tmp_path / "run" / "views.jsonl").exists()


def test_in_process_models_append_every_write():
    from types import SimpleNamespace

    from derivaudit.audit.scan import ScanConfig, chunk_size

    local = [SimpleNamespace(backend=SimpleNamespace(name=n)) for n in ("llamacpp", "transformers", "llamacpp")]
    assert chunk_size(ScanConfig(), local) == 1
    served = [SimpleNamespace(backend=SimpleNamespace(name="vllm"))] * 3
    assert chunk_size(ScanConfig(), served) == 8
    assert chunk_size(ScanConfig(chunk=3), local) == 3
