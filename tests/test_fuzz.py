"""Fuzzing the loader and every importer: mutated valid inputs and random bytes end in a
result or a LogError (exit code 2), never a traceback. Bounded for CI (a few hundred examples)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from derivaudit.cli import app
from derivaudit.importers import run_import
from derivaudit.log.io import LogError, check_log

FIX = Path(__file__).resolve().parent.parent / "fixtures"
# Derandomized so that CI is repeatable; DERIVAUDIT_FUZZ_EXAMPLES=5000 explores further by hand.
FUZZ = settings(max_examples=int(os.environ.get("DERIVAUDIT_FUZZ_EXAMPLES", 150)), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def _mutate_tree(doc: Any, data: st.DataObject, n: int = 3) -> Any:
    """Replace up to n random subtrees of a JSON document with random JSON values."""
    for _ in range(n):
        node, path = doc, []
        while isinstance(node, dict | list) and node and data.draw(st.booleans()):
            key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            path.append(key)
            node = node[key]
        value = data.draw(json_values)
        if not path:
            return value
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = value
    return doc


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")  # big integers as written


def _loads_or_logerror(path: Path) -> None:
    try:
        check_log([path])
    except LogError as e:
        assert e.problems


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_never_crash_the_loader(tmp_path_factory, raw):
    p = tmp_path_factory.mktemp("fz") / "x.jsonl"
    p.write_bytes(raw)
    _loads_or_logerror(p)


LINES = (FIX / "memories.jsonl").read_bytes().splitlines()[:12]


@FUZZ
@given(st.data())
def test_mutated_logs_never_crash_the_loader(tmp_path_factory, data):
    lines = list(LINES)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["tree", "bytes", "drop", "dup", "cut"]))
        if op == "tree":
            with contextlib.suppress(orjson.JSONDecodeError):  # unless already mutated into non-JSON
                lines[i] = _dumps(_mutate_tree(orjson.loads(lines[i]), data, 1))
        elif op == "bytes":
            pos = data.draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + data.draw(st.binary(min_size=1, max_size=4)) + lines[i][pos:]
        elif op == "drop" and len(lines) > 1:
            lines.pop(i)
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
    p = tmp_path_factory.mktemp("fz") / "x.jsonl"
    p.write_bytes(b"\n".join(lines) + data.draw(st.sampled_from([b"\n", b""])))
    _loads_or_logerror(p)


def _locomo() -> list:
    return [{"sample_id": "s1",
             "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1 May 2023",
                              "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"},
                                            {"speaker": "B", "dia_id": "D1:2", "text": "hello"}]},
             "observation": {"session_1_observation": {"A": [["A greeted B.", "D1:1"]]}}}]


SOURCES = {"mem0": lambda: json.loads((FIX / "mem0_history.json").read_text()),
           "graphiti": lambda: json.loads((FIX / "graphiti_export.json").read_text()),
           "letta": lambda: json.loads((FIX / "letta_agent.af").read_text()),
           "langgraph": lambda: json.loads((FIX / "langgraph_export.json").read_text()),
           "locomo": _locomo}

_CELL = st.none() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=30) | st.binary(max_size=10) | st.sampled_from(
    ["ADD", "UPDATE", "DELETE", "NONE", "2025-03-01T10:00:01-08:00", "2025-03-01T18:00:00+00:00", "{}", "[]",
     '{"role": "user", "content": 5}', '{"type": "message", "role": "assistant", "content": [1, {"text": 2}]}'])


@pytest.mark.parametrize("source,script,table,columns", [
    ("mem0-db", "mem0_history.sql", "history", 10), ("mem0-db", "mem0_history.sql", "messages", 6),
    ("openai-agents", "openai_agents_session.sql", "agent_messages", 4)])
def test_mutated_sqlite_exports_never_crash_an_importer(tmp_path, source, script, table, columns):
    """Real SQLite files in the stores' schemas with random rows added (any type in any column)."""
    import sqlite3

    @FUZZ
    @given(st.lists(st.tuples(*[_CELL] * columns), max_size=4))
    def check(rows):
        db = tmp_path / "store.db"
        db.unlink(missing_ok=True)
        con = sqlite3.connect(db)
        con.executescript((FIX / script).read_text())
        for r in rows:
            con.execute(f"INSERT OR IGNORE INTO {table} VALUES ({', '.join('?' * columns)})",
                        tuple(None if i == 0 and table == "agent_messages" else x for i, x in enumerate(r)))
        con.commit()
        con.close()
        try:
            run_import(source, db, tmp_path / "out.jsonl")
        except LogError as e:
            assert e.problems

    check()


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_mutated_exports_never_crash_an_importer(tmp_path, source):
    @FUZZ
    @given(st.data())
    def check(data):
        doc = _mutate_tree(SOURCES[source](), data, data.draw(st.integers(1, 4)))
        src, out = tmp_path / "in.json", tmp_path / "out.jsonl"
        src.write_bytes(_dumps(doc))
        try:
            run_import(source, src, out)
        except LogError as e:
            assert e.problems

    check()


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200) | st.sampled_from(LINES).map(lambda b: b[: len(b) // 2]))
def test_the_cli_answers_exit_0_or_2(tmp_path_factory, raw):
    p = tmp_path_factory.mktemp("fz") / "x.jsonl"
    p.write_bytes(raw)
    for args in (["validate", str(p)], ["views", str(p), "--skip-invalid"], ["import", "mem0", str(p), "-o",
                                                                             str(p.with_suffix(".out"))]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code in (0, 2), (args, r.output, r.exception)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
