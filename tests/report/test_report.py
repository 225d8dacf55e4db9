"""report: schema-valid JSON, gates and exit codes, pure stdout, inert hostile text in every format,
baseline comparison, and the HTML report in headless Chromium. The run is a real scan + replay of
fixture writes (including fixtures/hostile.jsonl) on the embedded model."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from derivaudit.cli import app
from derivaudit.report import ReportError, build, evaluate_ci_gates, parse_ci_gate, validate
from derivaudit.runs import folder as runs
from derivaudit.runs.folder import read_jsonl

from ..conftest import SCAN_LIMIT, copy_run

runner = CliRunner()
FIX = Path(__file__).resolve().parents[2] / "fixtures"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def run(fixture_scan, tmp_path_factory):
    """The test run's fixture scan (the hostile fixture, 2 conversations, plus 2 ordinary writes),
    copied, then replayed."""
    run = copy_run(fixture_scan[0], tmp_path_factory.mktemp("report") / "run")
    r = runner.invoke(app, ["replay", str(run), "--view", "holistic,obligation", "--evidence", "both",
                            "--noise", "0,2", "--point", "argmax"])
    assert r.exit_code == 0, r.output
    return run


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def report_cli(*args: str):
    return runner.invoke(app, ["report", *args])


@pytest.mark.slow
def test_json_validates_and_stdout_is_pure_json(run):
    r = report_cli(str(run), "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)  # nothing but JSON on stdout
    validate(doc)
    assert doc["schema_version"] == 1 and doc["run"]["writes"] == SCAN_LIMIT
    assert doc["run"]["conversations"] == len({x["conversation_id"] for x in read_jsonl(run / "labels.jsonl")}) >= 2
    assert set(doc["replay"]["settings"]) == {"holistic/citation_only", "holistic/expanded",
                                              "obligation/citation_only", "obligation/expanded"}
    assert doc["run"]["annotators"]["A"]["model"]["model"].startswith("SmolLM2")
    assert doc["run"]["replay_model"]["model"].startswith("SmolLM2")
    assert doc["run"]["input_sha"] and doc["generated_at"]
    for m in doc["scope"].values():
        lo, hi = m["balanced_ci"]
        if m["balanced"] is not None and lo is not None:
            assert lo <= hi
    # the JSON's metrics agree with the scope and replay tables
    assert doc["metrics"]["expanded_supported"] == doc["scope"]["expanded_supported"]["balanced"]
    assert doc["metrics"]["unsupported_admitted"] == doc["replay"]["settings"]["obligation/expanded"][
        "unsupported_admitted"]


@pytest.mark.slow
def test_same_run_same_numbers(run):
    a, b = build(run), build(run)
    for x in (a, b):
        x.pop("generated_at")
    assert a == b


@pytest.mark.slow
def test_gates_exit_codes(run):
    doc = build(run)
    value = doc["metrics"]["ambiguous"]
    assert report_cli(str(run), "--format", "json", "--fail-if", f"ambiguous>{value + 0.01}").exit_code == 0
    r = report_cli(str(run), "--format", "json", "--fail-if", f"ambiguous>={value}")
    assert r.exit_code == 1
    out = json.loads(r.stdout)  # the report is still written, gates included
    assert out["gates"][0]["failed"] is True and out["gates"][0]["value"] == value
    # percent form, several gates: one failing is enough
    r = report_cli(str(run), "--fail-if", "writes<1", "--fail-if", f"ambiguous>={math.floor(100 * value)}%")
    assert r.exit_code == 1
    assert report_cli(str(run), "--fail-if", "writes<1").exit_code == 0
    # per-setting names
    assert report_cli(str(run), "--format", "json", "--fail-if", "unsupported_admitted@holistic/expanded>1"
                      ).exit_code == 0
    # usage errors: unknown metric, malformed expression, unknown setting, missing run
    for bad in ("nonsense>1", "ambiguous >> 1", "ambiguous>", "valid_kept@atomic/expanded<0.5"):
        r = report_cli(str(run), "--format", "json", "--fail-if", bad)
        assert r.exit_code == 2, bad
        assert r.stdout == "", bad
    assert report_cli(str(run.parent / "nope")).exit_code == 2


def test_gate_parsing_and_missing_values():
    assert parse_ci_gate("unsupported_admitted>0.25") == ("unsupported_admitted", ">", 0.25)
    assert parse_ci_gate(" expanded_supported < 70% ") == ("expanded_supported", "<", 0.7)
    assert parse_ci_gate("auc@holistic/expanded<=0.6") == ("auc@holistic/expanded", "<=", 0.6)
    assert parse_ci_gate("unsupported.weighted!=0") == ("unsupported.weighted", "!=", 0.0)
    with pytest.raises(ReportError):
        parse_ci_gate("rm -rf>1")
    doc = {"metrics": {"unsupported_admitted": None, "writes": 3.0}}
    g = evaluate_ci_gates(doc, ["unsupported_admitted>0.25", "writes<1"])
    assert g[0]["failed"] and g[0]["why"] == "no value in this run"  # no evidence never passes a gate
    assert not g[1]["failed"]
    with pytest.raises(ReportError, match="replay"):
        evaluate_ci_gates({"metrics": {"writes": 3.0}}, ["valid_kept<0.5"])


@pytest.mark.slow
def test_hostile_text_is_inert(run, tmp_path):
    # table: rich markup is printed literally
    r = report_cli(str(run))
    assert r.exit_code == 0
    flagged_texts = [x["text"] for x in read_jsonl(run / "labels.jsonl")
                     if x["expanded_label"] in ("unsupported", "contradicted") and not x["unresolved"]]
    for text in flagged_texts[:10]:
        assert " ".join(text.split()) in r.stdout
    # CSV (report and export): no cell starts a formula
    r = report_cli(str(run), "--format", "csv")
    assert r.exit_code == 0
    for row in csv.reader(io.StringIO(r.stdout)):  # a negative number (a kappa) is a number, not a formula
        assert not any(c.startswith(("=", "+", "-", "@")) and not _number(c) for c in row)
    assert runner.invoke(app, ["export", str(run), str(tmp_path / "l.csv")]).exit_code == 0
    cells = [c for row in csv.reader((tmp_path / "l.csv").open()) for c in row]
    assert "'=HYPERLINK(\"http://example.invalid\",\"Robin volunteers at a shelter\")" in cells
    assert any(c.startswith("'@SUM(1+1)") for c in cells) and any(c.startswith("'-Kim saved") for c in cells)
    assert not any(c.startswith(("=", "+", "-", "@")) for c in cells)
    # Markdown: no raw HTML
    md = report_cli(str(run), "--format", "md").stdout
    assert "<script" not in md and "<img" not in md
    # JUnit: well-formed XML whatever the text
    j = report_cli(str(run), "--format", "junit").stdout
    root = ET.fromstring(j)
    cases = root.findall(".//testcase")
    assert len(cases) == SCAN_LIMIT
    fails = {c.get("name") for c in cases if c.find("failure") is not None}
    assert fails == {x["write_id"] for x in read_jsonl(run / "labels.jsonl")
                     if x["expanded_label"] in ("unsupported", "contradicted") and not x["unresolved"]}
    # HTML: no memory or passage text appears as markup; it travels compressed and is set as text
    html = report_cli(str(run), "--format", "html").stdout
    assert "<script>alert" not in html and "<img src=x" not in html and "[bold]Robin" not in html
    assert html.count("<script") == 2  # the data block and the page's own script


@pytest.mark.slow
def test_baseline_change_and_gate(run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run, other)
    labels = read_jsonl(other / "labels.jsonl")
    for x in labels:  # a worse memory writer: every write now unsupported after expansion
        x["expanded_label"] = "unsupported"
        x["unresolved"] = False
        x["search_limited"] = False
    runs.write_rows(other, runs.LABELS, labels)
    r = report_cli(str(other), "--baseline", str(run), "--format", "json", "--fail-if", "unsupported>0.5")
    doc = json.loads(r.stdout)
    validate(doc)
    base = build(run)["metrics"]["unsupported"]
    assert doc["change"]["unsupported"] == pytest.approx(1.0 - base)
    assert r.exit_code == (1 if 1.0 - base > 0.5 else 0)
    assert doc["gates"][0]["on"] == "change"
    r = report_cli(str(run), "--baseline", str(run), "--format", "json", "--fail-if", "unsupported!=0")
    assert r.exit_code == 0 and json.loads(r.stdout)["change"]["unsupported"] == 0


@pytest.mark.slow
def test_report_without_replay_and_bad_runs(run, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(run, bare)
    for name in ("replay.json", "replay_scores.jsonl"):
        (bare / name).unlink()
    r = report_cli(str(bare), "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["replay"] is None
    assert report_cli(str(bare), "--fail-if", "unsupported_admitted>0.2").exit_code == 2
    assert report_cli(str(bare), "--format", "html", "-o", str(tmp_path / "r.html")).exit_code == 0
    (bare / "scope.json").write_text("{not json")
    r = report_cli(str(bare))
    assert r.exit_code == 2 and "scope.json" in r.output and "Traceback" not in r.output
    (bare / "labels.jsonl").unlink()
    r = report_cli(str(bare))
    assert r.exit_code == 2 and "labels.jsonl is missing" in r.output


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (make browser installs it)")
def test_html_in_headless_chromium(run, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    out = tmp_path / "report.html"
    r = report_cli(str(run), "--format", "html", "-o", str(out))
    assert r.exit_code == 0, r.output
    shots = Path(__file__).resolve().parents[2] / "test-artifacts"
    shots.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning")
                else None)
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda q: problems.append(f"request: {q.url}") if not q.url.startswith(("file:", "data:"))
                else None)
        page.goto(out.as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=20_000)
        # plots rendered: inline SVGs with drawn paths and a real size
        for fid in ("plot-dist", "plot-roc", "plot-conv", "plot-noise"):
            box = page.locator(f"#{fid} svg").bounding_box()
            assert box and box["width"] > 100 and box["height"] > 100, fid
            assert page.locator(f"#{fid} svg path").count() > 5, fid
        rows = page.locator("#writes tbody tr")
        assert rows.count() == SCAN_LIMIT
        # drill-down of the hostile memory: opens, shows the text literally, marks passages
        page.fill("#q", "markup-1")
        assert rows.count() == 1
        rows.first.click()
        drill = page.locator("#drill")
        assert drill.is_visible()
        text = drill.inner_text()
        assert "[bold]Robin[/bold] has a cat named Miso <script>alert(1)</script> who eats tuna." in text
        assert "Citation-only view" in text and "Expanded-history view" in text
        assert page.locator("#drill li.cited").count() >= 2
        assert page.locator("#drill b, #drill img, #drill script").count() == 0
        assert page.title() == "derivaudit report"  # the <script> in passage text never ran
        page.screenshot(path=str(shots / "report.png"), full_page=True)
        browser.close()
    assert problems == []
    assert (shots / "report.png").stat().st_size > 10_000


def test_report_export_and_light_paths_import_no_pipeline_or_torch():
    import subprocess
    import sys

    code = ("import sys, derivaudit.report, derivaudit.review.export, derivaudit.runs, derivaudit.cli, "
            "derivaudit.models.openai, derivaudit.models.cache, derivaudit.audit, derivaudit.admission, "
            "derivaudit.rates, derivaudit.review, derivaudit.built, derivaudit.readpath, derivaudit.log\n"
            "bad = [m for m in ('torch', 'transformers', 'derivaudit.audit.scan', 'derivaudit.audit.annotate', "
            "'derivaudit.models.hf') if m in sys.modules]\n"
            "assert not bad, bad\n"
            "import derivaudit.report, derivaudit.review.export\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("damage", ["cut_line", "last_line_gone", "garbage_middle", "meta_cut", "meta_list",
                                    "obligations_cut"])
def test_a_damaged_run_is_exit_2_naming_the_file_in_every_command(synth_run, tmp_path, damage):
    """Issue 15: a cut or edited run file was used silently (fewer writes, JUnit tests=2, exit 0) or
    gave a traceback (HTML, export, meta.json, obligations.jsonl)."""
    run = tmp_path / "run"
    shutil.copytree(synth_run, run)
    name = {"meta_cut": "meta.json", "meta_list": "meta.json", "obligations_cut": "obligations.jsonl"}.get(
        damage, "labels.jsonl")
    p = run / name
    data = p.read_bytes()
    p.write_bytes({"cut_line": data[:-20], "last_line_gone": data[: data.rindex(b"\n", 0, len(data) - 1) + 1],
                   "garbage_middle": data.replace(b"\n", b"\nnot json\n", 1), "meta_cut": data[: len(data) // 2],
                   "meta_list": b"[]", "obligations_cut": data[:-20]}[damage])
    commands = [["report", run, "--format", fmt] for fmt in ("json", "junit", "md", "csv", "html")]
    commands += [["export", run, tmp_path / "x.csv"], ["export", run, tmp_path / "y.csv", "--level", "obligation"],
                 ["review", "sample", run, "-o", tmp_path / "s.csv"]]
    for args in commands:
        r = report_cli(*map(str, args[1:])) if args[0] == "report" else CliRunner().invoke(app, list(map(str, args)))
        if damage == "obligations_cut" and args[0] == "report" and args[3] != "html":
            continue  # report reads labels and scope only; the HTML drill-down reads obligations
        assert r.exit_code == 2, (args, r.output)
        assert name in r.output and r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
        assert "Traceback" not in r.output
    assert not (tmp_path / "x.csv").exists()


def test_the_format_names_come_from_the_registries():
    """Each --format offers exactly its registry's formats plus the terminal table: the run report's
    for report and scan, the read-path audits' own (their renderers take other arguments) for echo
    and overlap, so a format added to one is never offered where it cannot render."""
    from derivaudit.cli._common import ReadPathFormat, ReportFmt
    from derivaudit.report import FORMATS
    from derivaudit.report.readpath import READPATH_FORMATS

    assert [f.value for f in ReportFmt] == ["table", *FORMATS]
    assert [f.value for f in ReadPathFormat] == ["table", *READPATH_FORMATS]


def test_a_baseline_judged_by_another_model_is_refused_unless_asked_and_then_labelled(synth_run, tmp_path):
    """A change between two judges is not a change in the store (DerivAudit compares within one
    verifier): --baseline refuses it naming both, --across-judges labels every difference."""
    other = tmp_path / "other"
    shutil.copytree(synth_run, other)
    meta = runs.load_meta(other)
    judge = {"backend": "vllm", "model": "another-judge-7b"}
    meta["annotators"] = {role: {"role": role, "variant": "a", "model": judge} for role in ("A", "B", "adjudicator")}
    runs.save_meta(other, meta)
    r = report_cli(str(other), "--baseline", str(synth_run), "--format", "json")
    assert r.exit_code == 2 and "another-judge-7b" in r.output and "--across-judges" in r.output, r.output
    r = report_cli(str(other), "--baseline", str(synth_run), "--format", "md", "--across-judges")
    assert r.exit_code == 0, r.output
    section = r.stdout.split("Change against the baseline")[1].split("\n#")[0]
    rows = [x for x in section.splitlines() if x.startswith("| ") and not x.startswith("| metric")]
    assert rows and all("(across judges) |" in x for x in rows), rows
    doc = json.loads(report_cli(str(other), "--baseline", str(synth_run), "--format", "json",
                                "--across-judges").stdout)
    validate(doc)
    assert doc["baseline"]["across_judges"]["this_run"] != doc["baseline"]["across_judges"]["baseline"]
    same = json.loads(report_cli(str(synth_run), "--baseline", str(synth_run), "--format", "json").stdout)
    assert "across_judges" not in same["baseline"]  # one judge: compared as before


def test_the_search_cap_and_multi_passage_are_counted_as_the_paper_defines_them(synth_run):
    """Capped = more candidates than the expanded view's budget (the paper's search-limited), with
    derivaudit's floored flag among them; multi-passage on citation-supported writes too."""
    from derivaudit.audit.labels import answers

    doc = json.loads(report_cli(str(synth_run), "--format", "json").stdout)
    validate(doc)
    views = read_jsonl(synth_run / "views.jsonl")
    capped = sum(r["provenance"]["candidates"] > len(r["provenance"]["retrieved"]) for r in views)
    assert doc["search"] == {"writes": len(views), "capped": capped,
                             "search_limited": sum(r["search_limited"] for r in views),
                             "limit_floor": doc["run"]["evidence"].get("limit_floor")}
    assert capped > 0 and doc["search"]["search_limited"] <= capped
    assert doc["metrics"]["search_capped"] == pytest.approx(capped / len(views))
    labels = read_jsonl(synth_run / "labels.jsonl")
    prims = read_jsonl(synth_run / "primitives.jsonl")
    cited = [r["write_id"] for r in labels if r["citation_label"] == "supported"]
    spans = {w: set() for w in cited}
    for p in prims:
        if p["view"] == "citation_only" and p["write_id"] in spans:
            spans[p["write_id"]] |= set(answers(p).get("e_subset") or ())
    want = sum(len(s) > 1 for s in spans.values())
    assert doc["multi_passage"]["citation_supported"] == {"writes": len(cited), "spanning": want}
    assert doc["metrics"]["multi_passage_cited"] == (pytest.approx(want / len(cited)) if cited else None)
    md = report_cli(str(synth_run), "--format", "md").stdout
    assert f"Search cap: {capped} of {len(views)} writes" in md and "Multi\\-passage, the paper's way" in md


def test_bounded_scores_are_counted_beside_the_scoring_errors(synth_run, tmp_path):
    """Scores the top-k cap decided (scan and replay) are in the JSON, the metrics and the line of
    the scoring errors."""
    run = tmp_path / "run"
    shutil.copytree(synth_run, run)
    scope = runs.read_json(run, runs.SCOPE)
    runs.write_json(run, runs.SCOPE, {**scope, "bounded_scores": 3})
    replay = runs.read_json(run, runs.REPLAY)
    first = next(iter(replay["settings"]))
    replay["settings"][first]["bounded_scores"] = 2
    runs.write_json(run, runs.REPLAY, replay)
    doc = json.loads(report_cli(str(run), "--format", "json").stdout)
    validate(doc)
    assert doc["scoring_errors"]["bounded"]["scan"] == 3 and doc["scoring_errors"]["bounded"]["replay"][first] == 2
    assert doc["metrics"]["bounded_scores"] == 5
    assert "bounded scores (yes or no outside the top 100 first tokens): 5;" in report_cli(str(run), "--format",
                                                                                         "md").stdout
    plain = json.loads(report_cli(str(synth_run), "--format", "json").stdout)
    assert plain["metrics"]["bounded_scores"] == 0
