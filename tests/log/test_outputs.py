"""Nothing an output path points at is destroyed: devices and FIFOs are written in place,
symlinks through to their targets, inputs and directories refused before any work, modes kept, and
a failed write leaves nothing behind and ends with one line and exit 2."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from derivaudit.cli import app
from derivaudit.log.io import OutputError, atomic_writer, check_output

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with atomic_writer(link) as fh:
        fh.write(b"new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "missing.json")
    with atomic_writer(dangling) as fh:
        fh.write(b"x")
    assert dangling.is_symlink() and (tmp_path / "missing.json").read_text() == "x"


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with atomic_writer(fifo) as fh:
        fh.write(b"streamed\n")
    reader.join(10)
    assert got == [b"streamed\n"] and stat.S_ISFIFO(fifo.stat().st_mode) and not _leftovers(tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_dev_full_is_a_clear_error_and_stays_a_device(fixtures):
    r = cli("views", fixtures / "demo.jsonl", "-o", "/dev/full")
    assert r.exit_code == 2 and "/dev/full: cannot write: No space left on device" in r.output
    assert "wrote" not in r.output and "Traceback" not in r.output
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_modes_new_files_follow_the_umask_and_existing_files_keep_theirs(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_writer(tmp_path / "new.json") as fh:
            fh.write(b"{}")
        kept = tmp_path / "kept.json"
        kept.write_text("x")
        kept.chmod(0o640)
        with atomic_writer(kept) as fh:
            fh.write(b"y")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "y"


def test_an_output_that_is_an_input_is_refused_before_any_work(fixtures, tmp_path):
    log = tmp_path / "log.jsonl"
    shutil.copy(fixtures / "demo.jsonl", log)
    before = log.read_bytes()
    for args in (("echo", log, "-o", log), ("views", log, "-o", log)):
        r = cli(*args)
        assert r.exit_code == 2 and "also an input" in r.output and "Traceback" not in r.output, r.output
    assert log.read_bytes() == before
    link = tmp_path / "alias.jsonl"
    link.symlink_to(log)
    r = cli("views", log, "-o", link)
    assert r.exit_code == 2 and "also an input" in r.output and log.read_bytes() == before


def test_a_directory_output_is_refused_before_any_work(fixtures, tmp_path):
    r = cli("views", fixtures / "demo.jsonl", "-o", tmp_path)
    assert r.exit_code == 2 and "is a directory" in r.output and "building views" not in r.output
    with pytest.raises(OutputError, match="is a directory"):
        check_output(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders")
def test_a_read_only_folder_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="read-only or permission denied"):
            check_output(ro / "out.json")
    finally:
        ro.chmod(0o755)


@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_disk_full_leaves_the_old_file_and_no_temp_file(tiny_fs):
    out = tiny_fs / "report.json"
    out.write_text("previous report")
    with pytest.raises(OutputError, match="report.json: cannot write: No space left on device"), \
            atomic_writer(out) as fh:
        fh.write(b"x" * 200_000)
    assert out.read_text() == "previous report" and not _leftovers(tiny_fs)


def _big_log(path: Path, turns: int = 40_000, writes: int = 400) -> None:
    import orjson

    with path.open("wb") as fh:
        for i in range(turns):
            text = f"on day {i} I walked the dog number {i % 97} again"
            fh.write(orjson.dumps({"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i,
                                   "speaker": "A", "text": text}) + b"\n")
        for j in range(writes):
            fh.write(orjson.dumps({"type": "write", "write_id": f"w{j}", "conversation_id": "c",
                                   "text": f"A walked dog {j % 97}", "citations": [f"t{j}"],
                                   "last_seen_turn": f"t{turns - 1}"}) + b"\n")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_terminated_command_leaves_no_debris(tmp_path, sig):
    import signal
    import sys
    import time

    log, out, tmp = tmp_path / "big.jsonl", tmp_path / "views.jsonl", tmp_path / "tmp"
    tmp.mkdir()
    _big_log(log)
    env = {**os.environ, "TMPDIR": str(tmp)}
    p = subprocess.Popen([sys.executable, "-m", "derivaudit", "views", str(log), "-o", str(out)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not list(tmp.glob("derivaudit-log-*")) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, "finished before it could be stopped: make the log bigger"
    time.sleep(0.3)
    p.send_signal(getattr(signal, sig))
    _, stderr = p.communicate(timeout=60)
    assert p.returncode == 128 + getattr(signal, sig), stderr.decode()
    assert b"Traceback" not in stderr and f"stopped by signal {sig}".encode() in stderr
    assert not list(tmp.iterdir()) and not out.exists() and not _leftovers(tmp_path)


def test_spill_folders_of_dead_processes_are_removed_at_the_next_start(tmp_path):
    from derivaudit.log.spill import remove_stale

    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / f"derivaudit-log-{dead.pid}-abc").mkdir()
    (tmp_path / f"derivaudit-log-{os.getpid()}-live").mkdir()
    (tmp_path / "derivaudit-log-oldstyle").mkdir()  # no process id, fresh: kept
    assert remove_stale(str(tmp_path)) == [f"derivaudit-log-{dead.pid}-abc"]
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"derivaudit-log-oldstyle", f"derivaudit-log-{os.getpid()}-live"}


def test_json_outputs_escape_every_control_and_bidi_character(tmp_path):
    """DEL, U+009B (a one-byte CSI) and U+202E (bidi override) reach JSON and JSONL as escapes; a
    reader decodes the very same text."""
    import orjson

    nasty = "Ann\x7f adopted\x9b2J a \u202egrey\u2066 cat"
    log = tmp_path / "nasty.jsonl"
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": "t1", "order": 0, "speaker": "Ann", "text": nasty},
            {"type": "write", "write_id": "w1", "conversation_id": "c", "text": nasty, "citations": ["t1"],
             "last_seen_turn": "t1"}]
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = tmp_path / "views.jsonl"
    r = cli("views", log, "--format", "jsonl", "-o", out)
    assert r.exit_code == 0, r.output
    raw = out.read_bytes()
    for ch in ("\x7f", "\x9b", "\u202e", "\u2066"):
        assert ch.encode() not in raw
    assert b"\\u009b" in raw and b"\\u202e" in raw
    assert orjson.loads(raw.splitlines()[0])["text"] == nasty


def test_a_full_tmpdir_is_one_line_and_exit_2(tiny_fs, tmp_path):
    """The spill database of `validate` lives in $TMPDIR: when it fills, sqlite says 'database or
    disk is full'; the user gets that, the hint, and exit 2, no traceback."""
    import sys

    log = tmp_path / "big.jsonl"
    _big_log(log, turns=20_000, writes=10)
    p = subprocess.run([sys.executable, "-m", "derivaudit", "validate", str(log)], capture_output=True, text=True,
                       env={**os.environ, "TMPDIR": str(tiny_fs)}, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "full" in p.stderr and "TMPDIR" in p.stderr
