"""Output files: written atomically (a temp file renamed into place), checked before any work
(never an input, never a directory; a symlink written through, a FIFO or device as a stream)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ..safe import dumps as json_dumps


class OutputError(ValueError):
    """An output path that must not or cannot be written (the message names it and why)."""


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def check_output(path: str | Path, inputs: Iterable[str | Path] = ()) -> Path:
    """Before any work: the path an output will really be written to (a symlink is written through
    to its target), refusing one that is also an input, a directory, or in a folder that cannot
    be written. Raises OutputError."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(path)  # follows links, also those realpath cannot name (/proc/self/fd/1 -> pipe:[…])
    except OSError:
        st = None
    for i in inputs:
        if os.path.exists(i) and (os.path.realpath(i) == str(real)
                                  or st is not None and os.path.samefile(i, path) and stat.S_ISREG(st.st_mode)):
            raise OutputError(f"{path}: this output is also an input ({i}); it would be overwritten. "
                              "Write the output elsewhere")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a directory; name a file to write")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return path  # a FIFO, a device, a socket: written in place, as a stream
    folder = real.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"{path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write in {folder} (read-only or permission denied)")
    return real


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write to a temp file beside `path` and rename it into place only if the block succeeds.

    Nothing an output path points at is destroyed: a symlink is written through to its target
    (the link stays); a FIFO, a character device or a socket is written in place, as a stream,
    never replaced by a file; a directory is refused. A new file gets the usual mode (0666 less
    the umask), an existing one keeps its own. A write that fails (disk full, read-only) leaves
    no temp file and raises OutputError naming the path and the cause."""
    shown = Path(path)
    target = check_output(shown)
    if target.exists() and not target.is_file():  # also a link to one: opened through the link
        try:
            with open(target, mode) as fh:
                yield fh
                fh.flush()
        except OSError as e:
            raise OutputError(f"{shown}: cannot write: {e.strerror or e}") from None
        return
    perms = (target.stat().st_mode & 0o7777) if target.exists() else (0o666 & ~_umask())
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise OutputError(f"{shown}: cannot write in {target.parent}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, perms)
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp, str(target)):  # not the caller's own read
            raise OutputError(f"{shown}: cannot write: {e.strerror or e}") from None
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temp folder beside `path`, renamed to `path` only if the block succeeds (removed if not).
    Where another process put `path` in place first, its folder is kept and ours removed: two
    processes building the same thing (a converted model) agree on one."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as e:
        raise OutputError(f"{target}: cannot write in {target.parent}: {e.strerror or e}") from None
    try:
        yield tmp
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Atomically write rows as JSONL; returns the number written."""
    n = 0
    with atomic_writer(path) as fh:
        for row in rows:
            fh.write(json_dumps(row))
            fh.write(b"\n")
            n += 1
    return n
