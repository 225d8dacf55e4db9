"""Where runs go without -o, and which run a command takes without RUN (derivaudit/runs/workspace.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from derivaudit.audit import incremental
from derivaudit.log.io import check_rows
from derivaudit.runs import folder as runs
from derivaudit.runs import workspace


def _log(text: str = "Ann likes tea", turns: int = 3):
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i, "speaker": "Ann",
             "text": f"turn {i}"} for i in range(turns)]
    rows.append({"type": "write", "write_id": "w", "conversation_id": "c", "text": text, "citations": ["t0"],
                 "last_seen_turn": "t1"})
    log, problems = check_rows("mem.jsonl", rows)
    assert not problems
    return log


def _run_of(folder: Path, log) -> Path:
    folder.mkdir(parents=True)
    runs.save_meta(folder, {"log_digest": incremental.digest(log)})
    return folder


@pytest.mark.parametrize(("files", "name"), [
    (["memories.jsonl"], "memories"), (["/data/x/store.2026-12.jsonl.gz"], "store"),
    (["a b;rm -rf.jsonl", "other.jsonl"], "a_b_rm_-rf"), ([".jsonl"], "run"),
])
def test_the_folder_is_named_after_the_first_log(files, name):
    assert workspace.run_name([Path(f) for f in files]) == name


def test_a_scan_goes_to_its_logs_folder_and_back_to_it(tmp_path):
    base = tmp_path / "runs"
    assert workspace.scan_folder([Path("memories.jsonl")], _log(), base) == (base / "memories", None)
    _run_of(base / "memories", _log())
    assert workspace.scan_folder([Path("memories.jsonl")], _log(), base) == (base / "memories", None)
    # a grown log goes on in the same folder
    assert workspace.scan_folder([Path("memories.jsonl")], _log(turns=5), base) == (base / "memories", None)


def test_another_version_of_the_log_gets_its_own_folder_and_is_told(tmp_path):
    base = tmp_path / "runs"
    _run_of(base / "memories", _log())
    folder, why = workspace.scan_folder([Path("memories.jsonl")], _log("Ann likes coffee"), base)
    assert folder == base / "memories-2"
    assert "memories holds the audit of another version of this log" in why
    _run_of(base / "memories-2", _log("Ann likes coffee"))  # and that version comes back to its own folder
    assert workspace.scan_folder([Path("memories.jsonl")], _log("Ann likes coffee"), base)[0] == folder


def test_a_folder_that_is_not_a_run_is_never_written_into(tmp_path):
    base = tmp_path / "runs"
    (base / "memories").mkdir(parents=True)
    assert workspace.scan_folder([Path("memories.jsonl")], _log(), base)[0] == base / "memories"  # empty: usable
    (base / "memories" / "notes.txt").write_text("mine")
    with pytest.raises(runs.RunError, match=r"runs/memories exists and is not a run folder"):
        workspace.scan_folder([Path("memories.jsonl")], _log(), base)
    (base / "memories").rename(base / "elsewhere")
    (base / "memories").write_text("a file")
    with pytest.raises(runs.RunError, match="not a run folder"):
        workspace.scan_folder([Path("memories.jsonl")], _log(), base)


def test_the_latest_run_is_the_one_written_last(tmp_path):
    base = tmp_path / "runs"
    with pytest.raises(runs.RunError, match=r"no RUN given and there is no .*runs/ folder here: make one with "
                                            r"`derivaudit scan LOG`"):
        workspace.latest(base)
    base.mkdir()
    (base / "not-a-run").mkdir()
    with pytest.raises(runs.RunError, match="has no run folder"):
        workspace.latest(base)
    a = _run_of(base / "a", _log())
    b = _run_of(base / "b", _log("x"))
    os.utime(a / runs.META, ns=(2_000_000_000_000_000_000, 2_000_000_000_000_000_000))
    os.utime(b / runs.META, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    assert workspace.latest(base) == (a, [a, b])
