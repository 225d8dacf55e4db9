"""The gate's decision log: every turn the gate was sent and every write it judged, appended whole
(one write, fsynced) before the answer is sent, and read back when the gate restarts. A memory log
that `scan`, `replay` and `report` read like any other."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..log.io import header, read_objects
from ..safe import dumps as json_dumps

PRODUCER = "derivaudit serve: the gate's decision log"


class ServeError(ValueError):
    """A request the gate refuses: HTTP status, a message, and the request field at fault."""

    def __init__(self, status: int, message: str, field: str | None = None, code: str = "bad_request",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.code = status, message, field, code
        self.headers = headers or {}

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


def _set_apart(path: Path, torn: bytes) -> Path:
    """Keep a torn last line beside the log, in a file of its own (an earlier one is never
    overwritten): LOG.torn, else LOG.torn.1, LOG.torn.2, ..."""
    n = 0
    while (dest := path.parent / (path.name + ".torn" + (f".{n}" if n else ""))).exists():
        n += 1
    dest.write_bytes(torn)
    return dest


class DecisionLog:
    """The gate's memory log: every turn it was sent and every write it judged (verdict in
    `meta.gate`), appended as one write() and fsynced per call. Reopened, it restores the turns and
    the decisions, so a restarted gate goes on where it stopped."""

    def __init__(self, path: str | Path, config: dict[str, Any]) -> None:
        self.path = Path(path)
        self.turns: dict[str, list[dict[str, Any]]] = {}
        self.decisions: dict[str, dict[str, Any]] = {}
        self.writes_of: dict[str, list[dict[str, Any]]] = {}  # per conversation, in order
        self.torn: bytes = b""
        self.torn_path: Path | None = None  # where a torn last line was set apart
        self._lock = threading.Lock()
        if self.path.exists() and not self.path.is_file():  # a FIFO would hang, /dev/null would lose every answer
            raise ValueError(f"--log {self.path} is not a regular file (a device, a pipe or a link to one): the "
                             "decision log must be a file the gate can append to and read back")
        if self.path.exists() and self.path.stat().st_size:
            self._restore()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._append([{**header(PRODUCER), "meta": {"gate": config, "derivaudit": __version__}}])

    def _restore(self) -> None:
        raw = self.path.read_bytes()
        if not raw.endswith(b"\n"):  # a line torn by a kill mid-append was never answered: set aside
            cut = raw.rfind(b"\n") + 1
            self.torn = raw[cut:]
            keep = raw[:cut]
            self.torn_path = _set_apart(self.path, self.torn)
            with open(self.path, "r+b") as f:
                f.truncate(len(keep))
        items = read_objects(self.path)
        first = next((o for _, o, _ in items if o is not None), None)
        if not first or first.get("type") != "header" or first.get("producer") != PRODUCER:
            raise ValueError(f"{self.path} exists and is not a decision log of derivaudit serve; the gate appends "
                             "only to its own log (name a new file with --log)")
        for line, obj, problem in items:
            if problem is not None:
                raise ValueError(f"{self.path}:{line}: {problem.message}")
            if obj.get("type") == "turn":
                self.turns.setdefault(obj["conversation_id"], []).append(obj)
            elif obj.get("type") == "write":
                self.decisions[obj["write_id"]] = obj
                self.writes_of.setdefault(obj["conversation_id"], []).append(obj)

    def _append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append the rows whole, or not at all: a failed write (a full disk) is cut back to the last
        whole line and answered 507, so the log never holds a partial line a restart cannot read."""
        data = b"".join(json_dumps(r) + b"\n" for r in rows)
        with self._lock:
            st = os.fstat(self._fd)
            good = st.st_size
            try:
                now = os.stat(self.path)
            except OSError:
                now = None
            if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise ServeError(507, f"the decision log {self.path} was moved or removed while the gate ran: "
                                 "nothing of this request was logged or decided; restart the gate on its log",
                                 None, "log_unwritable")
            try:
                n = os.write(self._fd, data)
                while n < len(data):  # a short write: finish the lines
                    n += os.write(self._fd, data[n:])
                os.fsync(self._fd)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, good)
                raise ServeError(507, f"the decision log {self.path} could not be written ({e.strerror or e}): "
                                 "nothing of this request was logged or decided; retry when there is room", None,
                                 "log_unwritable") from None

    def add(self, turns: Sequence[dict[str, Any]], write: dict[str, Any] | None = None) -> None:
        """Append new turns (and a judged write) and remember them."""
        rows = [*turns, *([write] if write else [])]
        if not rows:
            return
        self._append(rows)
        for t in turns:
            self.turns.setdefault(t["conversation_id"], []).append(t)
        if write:
            self.decisions[write["write_id"]] = write
            self.writes_of.setdefault(write["conversation_id"], []).append(write)

    def close(self) -> None:
        os.close(self._fd)


