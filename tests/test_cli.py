"""The command line as users type it: exit codes, stdout purity, escaping, atomic outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import orjson
import pytest
import typer
from typer.testing import CliRunner

from derivaudit.cli import app
from derivaudit.cli._common import OUTPUT, handles_bad_input

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_validate_clean_and_bad(fixtures):
    r = run("validate", fixtures / "memories.jsonl")
    assert r.exit_code == 0, r.output
    r = run("validate", fixtures / "malformed.jsonl")
    assert r.exit_code == 2
    assert "malformed.jsonl:12: citations[0]:" in r.output
    assert "Traceback" not in r.output


def test_validate_json(fixtures):
    r = run("validate", fixtures / "malformed.jsonl", "--format", "json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and len(doc["problems"]) == 12
    assert {"file", "line", "field", "code", "message"} == set(doc["problems"][0])


def test_validate_missing_file(tmp_path):
    r = run("validate", tmp_path / "missing.jsonl")
    assert r.exit_code == 2 and "does not exist" in r.output


def test_views_jsonl_to_stdout_and_file(fixtures, tmp_path):
    r = run("views", fixtures / "memories.jsonl", "--format", "jsonl", "--write", "boston-2")
    assert r.exit_code == 0, r.output
    rows = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [x["write_id"] for x in rows] == ["boston-2"]
    out = tmp_path / "views.jsonl"
    r = run("views", fixtures / "memories.jsonl", "-o", out)
    assert r.exit_code == 0
    assert len(out.read_text().splitlines()) == 24


def test_views_unknown_write(fixtures):
    r = run("views", fixtures / "memories.jsonl", "--write", "nope")
    assert r.exit_code == 2 and "unknown write id" in r.output


def test_views_strict_and_skip_invalid(fixtures):
    r = run("views", fixtures / "malformed.jsonl")
    assert r.exit_code == 2 and "nothing was processed" in r.output
    r = run("views", fixtures / "malformed.jsonl", "--skip-invalid", "--format", "jsonl")
    assert r.exit_code == 0
    assert "skipped 12 bad record(s)" in r.stderr
    assert [orjson.loads(x)["write_id"] for x in r.stdout.splitlines()] == ["w2"]


def test_views_escapes_markup(tmp_path):
    log = tmp_path / "m.jsonl"
    rows = [
        {"type": "turn", "conversation_id": "c", "turn_id": "t1", "order": 0, "speaker": "[bold]x[/bold]",
         "text": "[red]not red[/red] <script>alert(1)</script>"},
        {"type": "write", "write_id": "w", "conversation_id": "c", "text": "[link=http://evil]click[/link]",
         "citations": ["t1"], "last_seen_turn": "t1"},
    ]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    r = run("views", log)
    assert r.exit_code == 0, r.output
    assert "[red]not red[/red]" in r.stdout
    assert "[link=http://evil]click[/link]" in r.stdout
    assert "[bold]x[/bold]" in r.stdout


def test_import_cli(fixtures, tmp_path):
    out = tmp_path / "g.jsonl"
    r = run("import", "graphiti", fixtures / "graphiti_export.json", "-o", out)
    assert r.exit_code == 0, r.output
    assert run("validate", out).exit_code == 0
    r = run("import", "nosuch", fixtures / "graphiti_export.json", "-o", out)
    assert r.exit_code == 2 and "unknown importer 'nosuch'" in r.output


@pytest.mark.slow
def test_check_on_the_embedded_model(fixtures):
    r = run("check", "--record", "Alex is moving to Boston for the new job.", "--evidence",
            fixtures / "passages.txt", "--no-cache", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = orjson.loads(r.stdout)
    assert doc["error"] is None and isinstance(doc["logodds"], float)
    assert doc["decision"] == ("admit" if doc["logodds"] > 0 else "reject")
    assert doc["passages"] == 2 and doc["model"]["backend"] == "transformers"


@pytest.mark.slow
def test_check_and_admit_are_one_library_path(fixtures, tmp_path, monkeypatch):
    monkeypatch.setenv("DERIVAUDIT_CACHE", str(tmp_path / "cache.sqlite"))
    from derivaudit import admit
    from derivaudit.log.io import read_passages

    record = "Alex is moving to Boston for the new job."
    passages = read_passages(fixtures / "passages.txt")
    for split in ("record", "decompose"):
        r = run("check", "--record", record, "--evidence", fixtures / "passages.txt", "--view", "atomic",
                "--split", split, "--format", "json")
        assert r.exit_code == 0, r.output
        v = admit(record, passages, view="atomic", split=split)
        assert orjson.loads(r.stdout)["logodds"] == pytest.approx(v["score"])
        assert v["verdict"]["logodds"] == pytest.approx(v["score"])  # min over parts decides
    assert admit(record, passages, view="atomic", split="record")["obligations"] == [["fact", record]]


def test_model_roles_usage_errors(fixtures, tmp_path):
    r = run("scan", fixtures / "memories.jsonl", "-o", tmp_path / "r", "--model-role", "critic=x")
    assert r.exit_code == 2 and "unknown role 'critic'" in r.output
    r = run("replay", tmp_path / "r", "--model-role", "annotator_b=x")
    assert r.exit_code == 2 and "unknown role" in r.output
    r = run("scan", fixtures / "memories.jsonl", "-o", tmp_path / "r", "--base-url", "http://127.0.0.1:9/v1")
    assert r.exit_code == 2 and "--base-url is for the openai backend" in r.output
    assert not (tmp_path / "r").exists()


def test_check_bad_inputs(fixtures, tmp_path):
    r = run("check", "--record", "x", "--evidence", tmp_path / "none.txt")
    assert r.exit_code == 2 and "cannot read evidence" in r.output
    bad = tmp_path / "ev.jsonl"
    bad.write_text('{"speaker": "A"}\n')
    r = run("check", "--record", "x", "--evidence", bad)
    assert r.exit_code == 2 and "ev.jsonl:1: text" in r.output
    r = run("check", "--record", "x", "--evidence", fixtures / "passages.txt", "--view", "nope")
    assert r.exit_code == 2 and "unknown view" in r.output
    r = run("check", "--record", "x", "--evidence", fixtures / "passages.txt", "--model", "/no/such.gguf")
    assert r.exit_code == 2 and "does not exist" in r.output
    r = run("check", "--record", "x", "--evidence", fixtures / "passages.txt", "--backend", "nope")
    assert r.exit_code == 2 and "unknown backend" in r.output


def test_cache_stats_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("DERIVAUDIT_HOME", str(tmp_path))
    from derivaudit.models.cache import ResultCache

    c = ResultCache()
    c.put_many([("k1", "score", "transformers", "m1", {"x": 1}), ("k2", "generate", "openai", "m2", "t")])
    c.close()
    r = run("cache", "stats", "--format", "json")
    assert r.exit_code == 0
    assert orjson.loads(r.stdout)["entries"] == 2
    r = run("cache", "clear", "--model", "m1")
    assert r.exit_code == 0 and "deleted 1" in r.output
    assert orjson.loads(run("cache", "stats", "--format", "json").stdout)["entries"] == 1


def test_cache_export_then_import_warms_another_home_and_bad_files_add_nothing(tmp_path, monkeypatch):
    """Cached answers exported from one home and imported into a fresh one are found there under the
    same keys; a damaged export is refused with file:line:field and adds nothing."""
    import gzip

    from derivaudit.models.cache import ResultCache

    k1, k2 = "a" * 64, "b" * 64
    monkeypatch.setenv("DERIVAUDIT_HOME", str(tmp_path / "one"))
    c = ResultCache()
    c.put_many([(k1, "score", "llamacpp", "m1", {"logodds": 1.5}), (k2, "generate", "openai", "m2", "text")])
    c.close()
    for name in ("all.jsonl.gz", "m1.jsonl"):
        r = run("cache", "export", "-o", tmp_path / name, *(("--model", "m1") if name == "m1.jsonl" else ()))
        assert r.exit_code == 0, r.output
    assert "exported 1 cached result" in r.output
    lines = gzip.decompress((tmp_path / "all.jsonl.gz").read_bytes()).splitlines()
    assert len(lines) == 3 and orjson.loads(lines[0])["format"] == "derivaudit-cache"
    db = tmp_path / "one" / "cache.sqlite"
    before = db.read_bytes()
    for target in (db, tmp_path / "one" / "cache.sqlite-wal"):  # the cache's own files are never the output
        r = run("cache", "export", "-o", target)
        assert r.exit_code == 2 and "cache" in r.output and "Traceback" not in r.output, r.output
    assert db.read_bytes() == before
    monkeypatch.setenv("DERIVAUDIT_HOME", str(tmp_path / "two"))
    r = run("cache", "import", tmp_path / "all.jsonl.gz")
    assert r.exit_code == 0 and "read 2" in r.output and "2 new" in r.output
    c = ResultCache()
    assert c.get_many([k1, k2]) == {k1: {"logodds": 1.5}, k2: "text"}
    c.close()
    r = run("cache", "import", tmp_path / "m1.jsonl")  # held already: kept, nothing new
    assert r.exit_code == 0 and "0 new" in r.output
    # damaged files: nothing imported, exit 2, the line and field named
    bad = tmp_path / "bad.jsonl"
    good = (tmp_path / "m1.jsonl").read_text().splitlines()
    row = orjson.loads(good[1])
    cases = {"key": [good[0], good[1], json.dumps({**row, "key": "c" * 64}), json.dumps({**row, "key": "nothex"})],
             "model": [good[0], json.dumps({**row, "key": "d" * 64, "model": 3})],
             "invalid JSON": [good[0], "{oops"],
             "format": [good[1]]}
    monkeypatch.setenv("DERIVAUDIT_HOME", str(tmp_path / "three"))
    for field, rows in cases.items():
        bad.write_text("\n".join(rows) + "\n")
        r = run("cache", "import", bad)
        assert r.exit_code == 2 and f"bad.jsonl:{len(rows)}" in r.output and field in r.output, r.output
        assert "Traceback" not in r.output
    (tmp_path / "broken.jsonl.gz").write_bytes(b"\x1f\x8b plain text after a gzip magic\n")
    r = run("cache", "import", tmp_path / "broken.jsonl.gz")
    assert r.exit_code == 2 and "gzip-compressed but damaged" in r.output
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress((tmp_path / "m1.jsonl").read_bytes())[:-12])
    r = run("cache", "import", tmp_path / "cut.jsonl.gz")  # its last line is cut: refused as a whole
    assert r.exit_code == 2 and "nothing was imported" in r.output
    assert orjson.loads(run("cache", "stats", "--format", "json").stdout)["entries"] == 0
    r = run("cache", "import", tmp_path / "missing.jsonl")
    assert r.exit_code == 2 and "missing.jsonl" in r.output


def test_validate_skip_invalid_counts_records_and_strict_fails_on_warnings(fixtures):
    bad = fixtures / "bad"
    r = run("validate", bad / "skip_claim.jsonl")
    assert r.exit_code == 2 and "3 problem(s) in 2 record(s)" in r.output
    r = run("validate", bad / "skip_claim.jsonl", "--skip-invalid")
    assert r.exit_code == 0 and "2 bad record(s) would be skipped (3 problem(s))" in r.output
    r = run("views", bad / "skip_claim.jsonl", "--skip-invalid", "--format", "jsonl")
    assert r.exit_code == 0 and "skipped 2 bad record(s) with 3 problem(s)" in r.output
    assert [json.loads(x)["write_id"] for x in r.stdout.splitlines()] == ["w1"]
    r = run("validate", bad / "confusable.jsonl")
    assert r.exit_code == 0 and "4 warning(s)" in r.output and "\u202e" not in r.output
    r = run("validate", bad / "confusable.jsonl", "--strict", "--format", "json")
    assert r.exit_code == 2 and {p["code"] for p in json.loads(r.stdout)["problems"]} == {
        "mixed_script_id", "invisible_in_id", "confusable_id"}


@pytest.mark.parametrize("fixture", ["deep.jsonl", "orders.jsonl", "dup_key.jsonl", "headers.jsonl",
                                     "parents.jsonl", "blank_text.jsonl"])
@pytest.mark.parametrize("command", ["validate", "views", "scan"])
def test_bad_input_is_exit_2_without_a_traceback(fixtures, tmp_path, fixture, command):
    args = [command, fixtures / "bad" / fixture] + (["-o", tmp_path / "run"] if command == "scan" else [])
    extras = {"validate": ([], ["--format", "json"]), "views": ([], ["--skip-invalid"]), "scan": ([],)}[command]
    for extra in extras:
        r = run(*args, *extra)
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        assert "Traceback" not in r.output and "RecursionError" not in r.output
        if not extra:
            assert r.exit_code == 2, r.output
    assert not (tmp_path / "run" / "labels.jsonl").exists()


def test_a_log_without_writes_is_exit_2_unless_allowed(fixtures, tmp_path):
    r = run("scan", fixtures / "bad" / "no_writes.jsonl", "-o", tmp_path / "run")
    assert r.exit_code == 2 and "no write" in r.output and "--allow-empty" in r.output
    assert not (tmp_path / "run").exists()
    r = run("scan", fixtures / "bad" / "no_writes.jsonl", "-o", tmp_path / "run", "--allow-empty",
            "--backend", "llamacpp", "--model", "smollm2")
    assert r.exit_code == 0, r.output
    r = run("report", tmp_path / "run", "--format", "junit")
    assert r.exit_code == 0 and 'tests="1"' in r.stdout and 'failures="1"' in r.stdout
    r = run("report", tmp_path / "run", "--format", "json", "--fail-if", "writes<0")
    assert r.exit_code == 1 and "the run has no write" in r.output


def test_echo_reports_gates_and_writes_json(fixtures, tmp_path):
    r = run("echo", fixtures / "echo.jsonl", "--serve", "fpa", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = orjson.loads(r.stdout)
    assert doc["metrics"]["echo.reads"] == 32 and doc["metrics"]["echo.density.fpa"] == 0
    out = tmp_path / "echo.json"
    r = run("echo", fixtures / "echo.jsonl", "-o", out, "--fail-if", "echo.density.fpa>0.3")
    assert r.exit_code == 2 and "needs --serve fpa" in r.output
    r = run("echo", fixtures / "echo.jsonl", "-o", out, "--serve", "fpa", "--fail-if", "echo.density>0.3",
            "--fail-if", "echo.density.fpa>0.3")
    assert r.exit_code == 1, r.output  # 0.459 after the correction, as logged
    assert "echo.density>0.3: 0.4586" in r.output and "FAILED" in r.output
    assert orjson.loads(out.read_bytes())["gates"][0]["failed"] is True
    r = run("echo", fixtures / "echo.jsonl", "--fail-if", "echo.densty>0.3")
    assert r.exit_code == 2 and "unknown metric" in r.output
    r = run("echo", fixtures / "echo.jsonl", "--serve", "mmr")
    assert r.exit_code == 2 and "fpa" in r.output


def test_echo_without_reads_fails_its_gates_and_says_why(fixtures):
    r = run("echo", fixtures / "memories.jsonl", "--fail-if", "echo.excess>0.5")
    assert r.exit_code == 1
    assert "no read event" in r.output


def test_echo_on_bad_reads_is_exit_2_naming_line_and_field(fixtures):
    r = run("echo", fixtures / "bad" / "reads.jsonl")
    assert r.exit_code == 2
    assert "reads.jsonl:9: retrieved[0]:" in r.output and "Traceback" not in r.output


def test_overlap_reports_bands_and_gates(fixtures, tmp_path):
    out = tmp_path / "overlap.json"
    r = run("overlap", fixtures / "overlap.jsonl", "-o", out, "--fail-if", "overlap.risky>0.5")
    assert r.exit_code == 1 and "overlap.risky>0.5: 0.6" in r.output
    doc = orjson.loads(out.read_bytes())
    assert doc["metrics"]["overlap.td_dup"] == 3 and doc["gates"][0]["failed"] is True
    r = run("overlap", fixtures / "overlap.jsonl", "--format", "md")
    assert r.exit_code == 0 and "| `overlap.risky` |" in r.stdout
    r = run("overlap", fixtures / "overlap.jsonl", "--band", "0.7,0.2")
    assert r.exit_code == 2 and "LOW,HIGH" in r.output
    r = run("overlap", fixtures / "memories.jsonl", "--fail-if", "overlap.mean>0.5")
    assert r.exit_code == 1 and "no read event" in r.output


@pytest.mark.parametrize("command,log", [("echo", "echo.jsonl"), ("overlap", "overlap.jsonl")])
def test_read_path_reports_in_every_format(fixtures, tmp_path, command, log):
    """md, csv (formula-safe), junit (one case per gate), html (one file, plots inline) and json."""
    import xml.etree.ElementTree as ET

    gate = "echo.density>0.3" if command == "echo" else "overlap.risky>0.5"
    for fmt in ("md", "csv", "junit", "html", "json"):
        out = tmp_path / f"r.{fmt}"
        r = run(command, fixtures / log, "--format", fmt, "-o", out, "--fail-if", gate)
        assert r.exit_code == 1, (fmt, r.output)  # the gate holds on both fixtures
        data = out.read_text()
        if fmt == "junit":
            suite = ET.fromstring(data)
            assert suite.get("failures") == "1" and suite.find(".//failure") is not None
        elif fmt == "html":
            assert data.startswith("<!doctype html>") and "<svg" in data and "FAILED" in data
        elif fmt == "csv":
            assert data.splitlines()[0].startswith("read_id,") and len(data.splitlines()) > 3
        elif fmt == "json":
            assert orjson.loads(data)["gates"][0]["failed"] is True


def test_read_path_html_escapes_ids_once(fixtures, tmp_path):
    """Ids reach the HTML page escaped exactly once (the table helper escapes; nothing before it)."""
    log = tmp_path / "echo.jsonl"
    log.write_text((fixtures / "echo.jsonl").read_text().replace('"keto"', '"keto&<b>"'))
    out = tmp_path / "e.html"
    r = run("echo", log, "--format", "html", "-o", out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "keto&amp;&lt;b&gt;" in page and "&amp;amp;" not in page and "<b>" not in page


def test_the_progress_line_shows_items_per_minute_without_the_resumed_ones():
    """A resumed scan's first report (writes already done) is not work of this run: the rate counts
    only what came after it."""
    import io

    from rich.console import Console
    from rich.progress import Progress

    from derivaudit.cli import RateColumn, _stage_progress

    buf = io.StringIO()
    bar = Progress(RateColumn(), console=Console(file=buf, force_terminal=True, width=80), auto_refresh=False)
    report = _stage_progress(bar)
    report("primitives", 50, 100)  # resumed: 50 written by an earlier run
    task = bar.tasks[0]
    assert RateColumn().render(task).plain == ""  # nothing done by this run yet
    task.start_time -= 30  # 30 s later, 3 more writes
    report("primitives", 3, 100)
    assert RateColumn().render(bar.tasks[0]).plain == "6.0/min"


@pytest.mark.slow
def test_the_users_brief_as_typed(tmp_path, monkeypatch, fixtures):
    """The brief's usages exactly as typed, in a fresh directory, on the README's demo log: scan
    without -o, replay without RUN, a report gating CI (JUnit and exit code), labels to CSV; then
    the same scan again (reused), a grown log (only the new write judged), and several runs."""
    import os
    import shutil
    import xml.etree.ElementTree as ET

    from derivaudit.runs import folder as runs

    monkeypatch.chdir(tmp_path)
    shutil.copy(fixtures / "demo.jsonl", "memories.jsonl")

    r = run("scan", "memories.jsonl")
    assert r.exit_code == 0, r.output
    assert "run folder: runs/memories (4 writes" in r.stderr
    assert "citation_supported" in r.stdout  # the scope report on stdout, as with -o
    labels = runs.read_rows("runs/memories", runs.LABELS)

    r = run("replay", "--view", "obligation")
    assert r.exit_code == 0, r.output
    assert "using runs/memories (the only run folder under runs/)" in r.stderr
    r = run("replay", "--setting", "holistic/expanded")
    assert r.exit_code == 0, r.output
    assert "kept from this run's earlier replays: obligation/expanded" in r.stderr
    settings = runs.read_json("runs/memories", runs.REPLAY)["settings"]
    assert list(settings) == ["obligation/expanded", "holistic/expanded"]

    r = run("report", "--format", "junit", "--fail-if", "writes<10", "--fail-if", "unsupported>1")
    assert r.exit_code == 1  # writes = 4 < 10 holds: the gate fails, so does the job
    gates = {c.get("name"): c for c in ET.fromstring(r.stdout).iter("testcase")
             if c.get("classname") == "derivaudit.gates"}
    assert gates["writes<10"].find("failure").get("message") == "gate failed: writes = 4 < 10"
    assert gates["unsupported>1"].find("failure") is None
    r = run("report")
    assert r.exit_code == 0 and "obligation/expanded" in r.stdout and "holistic/expanded" in r.stdout

    r = run("export", "labels.csv")
    assert r.exit_code == 0, r.output
    import csv

    rows = list(csv.DictReader((tmp_path / "labels.csv").open(encoding="utf-8-sig")))
    assert f"wrote {len(rows)} rows to labels.csv" in r.stderr
    assert {x["write_id"] for x in rows} == {x["write_id"] for x in labels}

    # one command gates CI: the scan again (its run reused, nothing judged), as JUnit
    r = run("scan", "memories.jsonl", "--fail-if", "writes<10", "--format", "junit")
    assert r.exit_code == 1 and "run folder: runs/memories" in r.stderr
    assert any(c.get("name") == "writes<10" for c in ET.fromstring(r.stdout).iter("testcase"))
    assert runs.read_json("runs/memories", runs.META)["reused"] == {"obligations": 4, "primitives": 4}

    # the store grows: one write appended, only it is judged, the old labels stay
    rows = [json.loads(x) for x in (tmp_path / "memories.jsonl").read_text().splitlines()]
    w = next(x for x in rows if x.get("type") == "write")
    with open("memories.jsonl", "a") as fh:
        fh.write(json.dumps({**w, "write_id": "grown-1", "text": w["text"] + " again"}) + "\n")
    r = run("scan", "memories.jsonl")
    assert r.exit_code == 0, r.output
    assert "4 of 5 writes judged by this run's earlier scan" in r.stderr and "run folder: runs/memories" in r.stderr
    assert runs.read_rows("runs/memories", runs.LABELS)[:4] == labels
    r = run("replay", "--view", "obligation")
    assert "dropped earlier replays made before the run was scanned again: holistic/expanded" in r.stderr

    # several runs: the most recent is taken and the others named
    shutil.copytree("runs/memories", "runs/older")
    os.utime("runs/older/meta.json", (1_000_000_000, 1_000_000_000))
    r = run("report", "--format", "json")
    assert r.exit_code == 0
    assert "using runs/memories, the most recent of 2 run folders under runs/ (runs/older); name another as RUN" \
        in r.stderr
    # a run in use by another process
    with runs.lock("runs/memories"):
        r = run("replay", "--view", "obligation")
    assert r.exit_code == 2 and "runs/memories is in use by another derivaudit" in r.stderr


def test_commands_without_a_run_say_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["replay", "--view", "obligation"], ["report"], ["export", "labels.csv"],
                 ["review", "sample", "-o", "review.csv", "--budget", "4"]):
        r = run(*args)
        assert r.exit_code == 2, args
        assert "no RUN given and there is no runs/ folder here: make one with `derivaudit scan LOG`" in r.stderr
    assert not (tmp_path / "labels.csv").exists() and not (tmp_path / "review.csv").exists()


def test_scan_gates_and_folders_are_checked_before_any_model_work(tmp_path, monkeypatch, fixtures):
    """A bad gate, or a default folder that is not a run, ends before the model loads (the test's
    model would take seconds to load; these take none), naming the expression or the path."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(fixtures / "demo.jsonl", "memories.jsonl")
    for gate, said in (("unsupportd>0.2", "unknown metric 'unsupportd'"),
                       ("unsupported>>0.2", "expected NAME OP NUMBER"),
                       ("valid_kept<0.9", "measured by `derivaudit replay`")):
        r = run("scan", "memories.jsonl", "--fail-if", gate)
        assert r.exit_code == 2 and f"--fail-if '{gate}'" in r.stderr and said in r.stderr, r.stderr
    (tmp_path / "runs" / "memories").mkdir(parents=True)
    (tmp_path / "runs" / "memories" / "mine.txt").write_text("not a run")
    r = run("scan", "memories.jsonl")
    assert r.exit_code == 2 and "runs/memories exists and is not a run folder" in r.stderr
    assert sorted(p.name for p in (tmp_path / "runs" / "memories").iterdir()) == ["mine.txt"]
    r = run("export", "runs/memories")
    assert r.exit_code == 2
    # the log's own run folder, held by another process: refused, naming it, before the model loads
    from derivaudit.audit import incremental
    from derivaudit.log.io import load_log
    from derivaudit.runs import folder as runs

    shutil.rmtree(tmp_path / "runs" / "memories")
    (tmp_path / "runs" / "memories").mkdir()
    runs.save_meta("runs/memories", {"log_digest": incremental.digest(load_log(["memories.jsonl"]))})
    with runs.lock("runs/memories"):
        r = run("scan", "memories.jsonl")
    assert r.exit_code == 2 and "runs/memories is in use by another derivaudit (pid" in r.stderr


def test_an_option_marked_as_output_is_checked_whatever_its_name(tmp_path):
    """The output check reads the OUTPUT marker, not parameter names: a command whose option is
    called `out` is protected too (here: it names its own input, refused before any work)."""
    calls = []
    mini = typer.Typer()

    @mini.command()
    @handles_bad_input
    def convert(src: Annotated[Path, typer.Argument()], out: Annotated[Path, typer.Option("--out"), OUTPUT]) -> None:
        calls.append((src, out))

    @mini.command()
    @handles_bad_input
    def other() -> None:
        pass

    src = tmp_path / "in.jsonl"
    src.write_text("{}\n")
    r = runner.invoke(mini, ["convert", str(src), "--out", str(src)])
    assert r.exit_code == 2 and "in.jsonl" in r.output and not calls
    r = runner.invoke(mini, ["convert", str(src), "--out", str(tmp_path)])  # a directory
    assert r.exit_code == 2 and not calls
    assert runner.invoke(mini, ["convert", str(src), "--out", str(tmp_path / "o.jsonl")]).exit_code == 0 and calls


def test_a_file_of_the_run_is_never_a_commands_output(synth_run, tmp_path):
    """Every file of a run folder is an input of the commands that read it: export, review sample
    and report refuse to write over one, before any work, and leave it as it was."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(synth_run, folder)
    labels = (folder / "labels.jsonl").read_bytes()
    for args in (("export", folder, folder / "labels.jsonl"),
                 ("review", "sample", folder, "-o", folder / "labels.jsonl"),
                 ("report", folder, "--format", "json", "-o", folder / "meta.json"),
                 ("export", folder, folder / "checksums.json")):
        r = run(*args)
        assert r.exit_code == 2 and "also an input" in r.output, (args, r.output)
    assert (folder / "labels.jsonl").read_bytes() == labels
    assert run("export", folder, folder / "labels.csv").exit_code == 0  # a new file in the folder is fine


def test_an_output_folder_under_a_file_is_named_as_such(fixtures, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    r = run("families", "build", fixtures / "families.jsonl", "--log", fixtures / "padding.jsonl", "-o", blocker)
    assert r.exit_code == 2 and "is a file, not a folder" in r.output, r.output


@pytest.mark.slow
def test_echo_and_overlap_answers_in_every_renderer_on_the_embedded_pipeline(fixtures, tmp_path):
    """`echo LOG --answers` and `overlap LOG --answers` on the suite's model: the answer tables in
    the terminal, Markdown, HTML, CSV and JSON; gates on answer metrics."""
    from derivaudit import load_log

    for cmd, log, methods in (("echo", "echo_answers.jsonl", {"none", "budget", "fpa_raw", "fpa"}),
                              ("overlap", "overlap.jsonl", {"none", "budget", "memtrim"})):
        path = str(fixtures / log)
        r = runner.invoke(app, [cmd, path, "--answers", "--format", "json", "-o", str(tmp_path / f"{cmd}.json")])
        assert r.exit_code == 0, r.output
        doc = json.loads((tmp_path / f"{cmd}.json").read_text())
        ans = doc["answers"]
        assert set(ans["methods"]) == methods and ans["reads"] == 4
        assert ans["skipped_no_expected"] == sum(not r.expected for r in load_log(path).reads) == 1
        for row in ans["rows"]:  # every method answered (or the empty answer counted), and judged
            for m in methods:
                a = row["answers"][m]
                assert a["error"] == "empty answer" if not a["answer"] else a["accurate"] in (True, False)
        assert ans["settings"]["models"]["generator"] == ans["settings"]["models"]["answer_judge"]
        assert doc["metrics"][f"{cmd}.answers.reads"] == 4
        r = runner.invoke(app, [cmd, path, "--answers"])  # the terminal tables (cached answers)
        assert r.exit_code == 0 and "Answers" in r.output and "no memory" in r.output, r.output
        for fmt, marker in (("md", "## Answers"), ("html", "<h2>Answers</h2>"), ("csv", "answer_budget")):
            r = runner.invoke(app, [cmd, path, "--answers", "--format", fmt])
            assert r.exit_code == 0 and marker in r.output, (fmt, r.output[-500:])
        r = runner.invoke(app, [cmd, path, "--answers", "--fail-if", f"{cmd}.answers.accuracy.budget>=0"])
        assert r.exit_code == 1  # a gate on an answer metric holds


@pytest.mark.slow
def test_echo_answers_through_an_openai_compatible_server_on_loopback(fixtures):
    """The answer replay over the openai backend: a real server on loopback answering from the
    suite's model, generation and the digit-read grade both through its API."""
    from derivaudit.models import ModelPool, ModelSpec
    from tests.openai_server import ModelServer

    with ModelPool(cache=False) as pool, ModelServer(pool.get(ModelSpec())) as server:
        r = runner.invoke(app, ["echo", str(fixtures / "echo_answers.jsonl"), "--answers", "--backend", "openai",
                                "--base-url", server.url, "--model", "smollm2", "--format", "json", "--no-cache"])
        answered = server.answered
    assert r.exit_code == 0, r.output
    ans = json.loads(r.stdout)["answers"]
    assert ans["settings"]["models"]["generator"] == "openai:smollm2" and ans["reads"] == 4
    assert answered >= 16  # at least one generation per read and method, and their judgments
    judged = [a for row in ans["rows"] for a in row["answers"].values() if not a["error"]]
    assert judged and all(a["grade"] in range(5) for a in judged if a["accurate"] is not None)
