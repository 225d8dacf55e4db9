"""The run folder: file names in one place, tolerant reading of interrupted appends, resume."""

import pytest

from derivaudit import runs
from derivaudit.runs import RunError, Stage, read_jsonl


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


def test_read_jsonl_raises_on_garbage_before_the_last_line(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_bytes(b'{"a": 1}\n{"b"\n{"c": 3}\n')
    with pytest.raises(ValueError):
        read_jsonl(p)


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
