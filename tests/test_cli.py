"""The command line as users type it: exit codes, stdout purity, escaping, atomic outputs."""

from __future__ import annotations

import json

import orjson
from typer.testing import CliRunner

from derivaudit.cli import app

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
    assert r.exit_code == 2 and "unknown source" in r.output
