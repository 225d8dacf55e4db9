"""The result cache's files as untrusted input: an export is read within the log reader's limits
and checked value by value; a damaged database is named, never a traceback; an export is inert."""

from __future__ import annotations

import gzip
import json
import os

import orjson
import pytest
from typer.testing import CliRunner

from derivaudit.cli import app
from derivaudit.models.cache import CacheFileError, ResultCache, value_problem

runner = CliRunner()
HEADER = {"type": "header", "format": "derivaudit-cache", "cache_version": 1}


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DERIVAUDIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _entry(key: str, kind: str, value) -> dict:
    return {"key": key, "kind": kind, "backend": "llamacpp", "model": "m", "value": value, "created": 1.0}


def test_an_endless_input_stops_at_the_line_limit(home, monkeypatch):
    monkeypatch.setenv("MAX_LINE_BYTES", str(1 << 20))  # the limit the log reader uses, made small
    r = run("cache", "import", "/dev/zero")
    assert r.exit_code == 2 and "MAX_LINE_BYTES" in r.output and "nothing was imported" in r.output, r.output
    assert "Traceback" not in r.output


def test_a_gzip_bomb_stops_at_the_inflation_ratio(home, tmp_path, monkeypatch):
    monkeypatch.setenv("GZIP_RATIO_FROM", str(1 << 20))
    bomb = tmp_path / "bomb.jsonl.gz"
    value = "x" * (24 << 20)  # one 24 MiB value: compresses ~1000x
    bomb.write_bytes(gzip.compress(orjson.dumps(HEADER) + b"\n" + orjson.dumps(_entry("a" * 64, "generate", value))))
    assert bomb.stat().st_size < 100_000
    r = run("cache", "import", bomb)
    assert r.exit_code == 2 and "MAX_GZIP_RATIO" in r.output, r.output
    assert ResultCache().stats()["entries"] == 0


@pytest.mark.parametrize(("kind", "value", "why"), [
    ("score", "not a score", "a score is an object"),
    ("score", None, "a score is an object"),
    ("score", {"logodds": "high"}, "logodds: a number or null"),
    ("score", {"logodds": None}, "exactly when error"),
    ("score", {"logodds": 1.0, "top": [["yes", "x"]]}, "top:"),
    ("generate", 5, "a generated answer is a string"),
    ("guess", "x", "kind: score or generate"),
])
def test_an_entry_that_a_scan_could_not_use_is_refused_naming_its_line(home, tmp_path, kind, value, why):
    f = tmp_path / "bad.jsonl"
    good = _entry("b" * 64, "score", {"logodds": 1.5, "logp_yes": -0.2, "logp_no": -1.7, "bounded": False,
                                      "error": None, "k": 100, "top": [["yes", -0.2]]})
    f.write_text("\n".join(json.dumps(x) for x in (HEADER, good, _entry("c" * 64, kind, value))) + "\n")
    r = run("cache", "import", f)
    assert r.exit_code == 2 and "bad.jsonl:3: value:" in r.output and why in r.output, r.output
    assert ResultCache().stats()["entries"] == 0  # the good line before it is not imported either
    assert value_problem("score", good["value"]) is None


def test_a_damaged_cache_database_is_named_with_what_to_do(home, tmp_path):
    home.mkdir(parents=True)
    (home / "cache.sqlite").write_bytes(os.urandom(8192))
    export = tmp_path / "e.jsonl"
    export.write_text(json.dumps(HEADER) + "\n")
    for args in (("cache", "stats"), ("cache", "export", "-o", tmp_path / "out.jsonl"), ("cache", "import", export),
                 ("cache", "clear")):
        r = run(*args)
        assert r.exit_code == 2, (args, r.output)
        assert "cache.sqlite: the result cache is damaged" in r.output and "rm " in r.output, r.output
        assert "Traceback" not in r.output and len(r.output.strip().splitlines()) <= 3
    with pytest.raises(CacheFileError, match="damaged"):  # as a scan opens it
        ResultCache(home / "cache.sqlite")


def test_an_export_writes_control_and_bidi_characters_escaped(home, tmp_path, monkeypatch):
    c = ResultCache()
    c.put_many([("d" * 64, "generate", "llamacpp", "m", "FACT: Alex\u202e moved\u009b31m \u2066here")])
    c.close()
    out = tmp_path / "e.jsonl"
    assert run("cache", "export", "-o", out).exit_code == 0
    data = out.read_bytes()
    for ch in ("\u202e", "\u009b", "\u2066"):
        assert ch.encode() not in data
    assert b"\\u202e" in data
    monkeypatch.setenv("DERIVAUDIT_HOME", str(tmp_path / "other"))
    assert run("cache", "import", out).exit_code == 0  # it round-trips: the text itself is unchanged
    assert ResultCache().get_many(["d" * 64]) == {"d" * 64: "FACT: Alex\u202e moved\u009b31m \u2066here"}
