"""The run folder: file names in one place, checksums on every file, tolerant reading of interrupted
appends (partial files only), resume, the writer lock."""

import pytest

from derivaudit.runs import folder as runs
from derivaudit.runs.folder import RunError, Stage, read_jsonl


def test_stage_drops_a_cut_off_line_and_stale_partials(tmp_path):
    st = Stage(tmp_path, "x", "fp1", {})
    with st.appender() as append:
        append([{"a": 1}, {"a": 2}])
    with (tmp_path / "x.partial.jsonl").open("ab") as fh:
        fh.write(b'{"a": 3')
    assert Stage(tmp_path, "x", "fp1", {}).resumed() == [{"a": 1}, {"a": 2}]
    assert Stage(tmp_path, "x", "other", {}).resumed() == []
    assert not (tmp_path / "x.partial.jsonl").exists()


def test_stage_finish_records_the_fingerprint(tmp_path):
    meta: dict = {}
    st = Stage(tmp_path, "primitives", "fp", meta)
    assert not st.done()
    with st.appender() as append:
        append([{"a": 1}])
    st.finish([{"a": 1}, {"a": 2}])
    assert st.done() and meta["stages"] == {"primitives": "fp"}
    assert read_jsonl(tmp_path / runs.PRIMITIVES) == [{"a": 1}, {"a": 2}]
    assert not st.partial.exists()
    assert not Stage(tmp_path, "primitives", "changed", meta).done()


def test_read_jsonl_names_the_damaged_line(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_bytes(b'{"a": 1}\n{"b"\n{"c": 3}\n')
    with pytest.raises(RunError, match=r"f\.jsonl:2: not a JSON object"):
        read_jsonl(p)
    p.write_bytes(b'{"a": 1}\n[1]\n')
    with pytest.raises(RunError, match=r"f\.jsonl:2: not a JSON object"):
        read_jsonl(p)
    p.write_bytes(b'{"a": 1}\n{"b": 2')
    with pytest.raises(RunError, match=r"f\.jsonl:2: the last line is cut off"):
        read_jsonl(p)
    assert read_jsonl(p, tolerant=True) == [{"a": 1}]


ROWS = [{"write_id": f"w{i}", "x": i} for i in range(3)]


@pytest.mark.parametrize(("damage", "match"), [
    (lambda b: b[: b.rindex(b"\n", 0, len(b) - 1) + 1], r"labels\.jsonl:2: 2 rows where 3 were written"),
    (lambda b: b[:-5], r"labels\.jsonl:3: the last line is cut off"),  # cut mid-line
    (lambda b: b.replace(b'{"write_id":"w1","x":1}', b"garbage"), r"labels\.jsonl:2: not a JSON object"),
    (lambda b: b.replace(b'"x":1', b'"x":7'), r"labels\.jsonl: .*sha256 mismatch"),  # edited in place
    (lambda b: b + b'{"write_id":"w9","x":9}\n', r"4 rows where 3 were written"),
])
def test_a_damaged_run_file_is_an_error_naming_file_and_line(tmp_path, damage, match):
    runs.write_rows(tmp_path, runs.LABELS, ROWS)
    assert runs.read_rows(tmp_path, runs.LABELS) == ROWS
    p = tmp_path / runs.LABELS
    p.write_bytes(damage(p.read_bytes()))
    with pytest.raises(RunError, match=match):
        runs.read_rows(tmp_path, runs.LABELS)
    assert runs.damaged(tmp_path, runs.LABELS)


@pytest.mark.parametrize("content", [b"", b"[]", b'{"stages": ', b"null"])
def test_a_damaged_meta_is_an_error_not_a_traceback(tmp_path, content):
    runs.save_meta(tmp_path, {"stages": {}})
    (tmp_path / runs.META).write_bytes(content)
    with pytest.raises(RunError, match="meta.json"):
        runs.load_meta(tmp_path)


def test_a_stage_with_a_damaged_file_is_not_done_and_says_why(tmp_path):
    meta: dict = {}
    st = Stage(tmp_path, "obligations", "fp", meta)
    st.finish(ROWS)
    assert Stage(tmp_path, "obligations", "fp", meta).done()
    p = tmp_path / runs.OBLIGATIONS
    p.write_bytes(p.read_bytes()[:-3])
    again = Stage(tmp_path, "obligations", "fp", meta)
    assert not again.done() and "cut off" in again.why


def test_the_lock_names_its_holder_and_detects_a_stale_one(tmp_path):
    import os
    import subprocess
    import sys

    with runs.lock(tmp_path) as stale:
        assert stale is None
        assert (tmp_path / runs.LOCK).read_text().strip() == str(os.getpid())
        code = "from derivaudit import runs; import sys\ntry:\n  runs.lock(sys.argv[1]).__enter__()\n" \
               "except runs.RunError as e: print(e)"
        other = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
        assert f"in use by another derivaudit (pid {os.getpid()})" in other.stdout
    assert (tmp_path / runs.LOCK).read_text() == ""  # released cleanly
    # a holder killed with -9 leaves its pid behind but not the lock
    code = ("from derivaudit import runs; import os, sys\n"
            "held = runs.lock(sys.argv[1]); held.__enter__(); print(os.getpid()); os._exit(0)")
    killed = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    with runs.lock(tmp_path) as stale:
        assert stale == killed.stdout.strip()
    with pytest.raises(RunError, match="no such run folder"):
        runs.lock(tmp_path / "nope").__enter__()


def test_require_names_the_missing_file(tmp_path):
    with pytest.raises(RunError, match="no such run folder"):
        runs.require(tmp_path / "nope", (runs.LABELS,), "run scan")
    with pytest.raises(RunError, match=r"labels\.jsonl is missing: run scan"):
        runs.require(tmp_path, (runs.LABELS,), "run scan")
    runs.write_rows(tmp_path, runs.LABELS, [{"x": 1}])
    runs.require(tmp_path, (runs.LABELS,), "run scan")


def test_json_files_round_trip_and_bad_json_is_a_run_error(tmp_path):
    runs.save_meta(tmp_path, {"b": 1, "a": [1, 2]})
    assert runs.load_meta(tmp_path) == {"a": [1, 2], "b": 1}
    assert runs.read_json_if(tmp_path, runs.REPLAY) is None
    assert runs.read_rows_if(tmp_path, runs.REPLAY_SCORES) == []
    (tmp_path / runs.SCOPE).write_text("{not json")
    with pytest.raises(RunError, match="scope.json"):
        runs.read_json(tmp_path, runs.SCOPE)
    assert runs.modified_at(tmp_path, runs.META).endswith("+00:00")
    assert runs.modified_at(tmp_path, runs.REPLAY) is None


def test_fingerprint_is_order_independent_for_keys_only():
    assert runs.fingerprint({"a": 1, "b": 2}) == runs.fingerprint({"b": 2, "a": 1})
    assert runs.fingerprint([1, 2]) != runs.fingerprint([2, 1])
