"""Untrusted text made inert: terminals, Markdown, CSV, JUnit, HTML and SVG, spreadsheets."""

import pytest

from derivaudit.safe import cell, escape, html_escape, neutralise, visible


@pytest.mark.parametrize(("value", "safe"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1", "'+1"), ("-2", "'-2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("plain", "plain"), (3, 3), (None, None),
])
def test_formula_cells_are_neutralised(value, safe):
    assert neutralise(value) == safe


RAW = ("\x1b[2J", "\x1b]0;", "\x1b]8;", "\x07", "\x08", "\x9b", "\u202e", "\x00")


def _raw_controls(text: str) -> list[str]:
    return [r for r in RAW if r in text]


@pytest.mark.parametrize(("value", "shown"), [
    ("a\x1b[2Jb", "a\\u001b[2Jb"), ("\x1b]0;title\x07", "\\u001b]0;title\\u0007"), ("\x9b31m", "\\u009b31m"),
    ("x\u202ey", "x\\u202ey"), ("zero\u200bwidth", "zero\\u200bwidth"), ("nul\x00", "nul\\u0000"),
    ("two\nlines\tand tab", "two\\u000alines\\u0009and tab"), ("plain ünïcode ✓", "plain ünïcode ✓"),
])
def test_visible_shows_every_control_as_an_escape(value, shown):
    assert visible(value) == shown
    assert not _raw_controls(visible(value))


def test_visible_keeps_newlines_only_when_asked():
    assert visible("a\nb\tc\x1b", newlines=True) == "a\nb\tc\\u001b"
    assert visible(5) == 5 and visible(None) is None


def test_terminal_escape_and_csv_cell_and_html():
    assert escape("[bold]x\x1b[0m[/bold]") == "\\[bold]x\\u001b[0m\\[/bold]"
    assert cell("=1+1\x1b") == "'=1+1\\u001b"
    assert html_escape("<b>\x1b</b>") == "&lt;b&gt;\\u001b&lt;/b&gt;"


def test_controls_never_reach_the_terminal_from_views(fixtures):
    from typer.testing import CliRunner

    from derivaudit.cli import app

    r = CliRunner().invoke(app, ["views", str(fixtures / "controls.jsonl")])
    assert r.exit_code == 0, r.output
    assert "Porto" in r.output and "\\u001b" in r.output
    assert not _raw_controls(r.output)
    r = CliRunner().invoke(app, ["views", str(fixtures / "controls.jsonl"), "--write", "nope\x1b[2J\x07"])
    assert r.exit_code == 2 and "unknown write id" in r.output and not _raw_controls(r.output)


def test_controls_never_reach_report_formats_export_or_svg(synth_run, tmp_path):
    import shutil

    from derivaudit import report
    from derivaudit.review.export import export_csv
    from derivaudit.runs import folder as runs

    run = shutil.copytree(synth_run, tmp_path / "run")
    nasty = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"
    labels = runs.read_rows(run, runs.LABELS)
    labels[0]["text"] = "memory " + nasty
    labels[0]["write_id"] = "w" + nasty
    labels[0]["conversation_id"] = "c" + nasty
    labels[0]["expanded"]["label"] = labels[0]["expanded_label"] = "unsupported"
    labels[0]["unresolved"] = False
    runs.write_rows(run, runs.LABELS, labels)
    doc = report.build(run)
    for fmt in ("md", "csv", "junit", "html"):  # JSON keeps the data exact (its own escapes for C0)
        text = report.render(doc, fmt).decode()
        assert not _raw_controls(text), fmt
    import io

    from rich.console import Console

    from derivaudit.report.table import print_report

    buf = io.StringIO()
    print_report(Console(file=buf, width=200), doc)
    assert "memory" in buf.getvalue() and not _raw_controls(buf.getvalue())
    out = tmp_path / "labels.csv"
    export_csv(run, out)
    assert "\\u001b" in out.read_text() and not _raw_controls(out.read_text())


def test_an_id_with_a_newline_stays_on_one_line_in_a_table(tmp_path):
    """`views` prints each passage's turn id in a table cell: a newline in it is shown as \\u000a."""
    import orjson
    from typer.testing import CliRunner

    from derivaudit.cli import app
    from derivaudit.safe import escape_id

    assert escape_id("t1\nFAKE ROW\t[red]x") == "t1\\u000aFAKE ROW\\u0009\\[red]x"
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": "t1\nFAKE", "order": 0, "speaker": "A",
             "text": "we moved to Porto"},
            {"type": "write", "write_id": "w1", "conversation_id": "c", "text": "A moved to Porto",
             "citations": ["t1\nFAKE"], "last_seen_turn": "t1\nFAKE"}]
    log = tmp_path / "ids.jsonl"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    r = CliRunner().invoke(app, ["views", str(log)])
    assert r.exit_code == 0, r.output
    assert "t1\\u000aFAKE" in r.output and "\nFAKE" not in r.output
