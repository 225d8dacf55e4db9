"""Where runs go when the user names none: `./runs/`, one folder per log.

`scan LOG` without `-o` scans into `runs/<LOG's name without its extension>`. That folder is reused
when it holds a scan of the same log or of a log this one grew from by appending (incremental.py:
only the new writes are judged). When it holds a scan of another version of the log (a write or
turn edited or removed), the results are never mixed: the scan goes to the first of
`runs/<name>-2`, `runs/<name>-3`, ... that is free or holds this log's own earlier scan, and says
so. A folder there that is not a run folder (no meta.json, not empty) is refused, never written
into.

`replay`, `report`, `export` and `review sample` without RUN take the most recent run folder under
`./runs/` (the one whose meta.json was written last) and say which.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..log.records import MemoryLog
from . import folder as runs

RUNS = Path("runs")
_UNSAFE = re.compile(r"[^\w.-]+")


def run_name(files: Sequence[Path]) -> str:
    """The default folder name of a scan of `files`: the first file's name without its extensions
    (`memories.jsonl` -> `memories`), characters other than letters, digits, `.`, `-`, `_` as `_`."""
    name = Path(files[0]).name.split(".", 1)[0] if files else ""
    return _UNSAFE.sub("_", name).strip("._") or "run"


def is_run(folder: Path) -> bool:
    return (folder / runs.META).is_file()


def scan_folder(files: Sequence[Path], log: MemoryLog, base: Path = RUNS) -> tuple[Path, str | None]:
    """The folder a scan of `log` (read from `files`) goes to without `-o`, and, when it is not the
    first candidate, why. RunError for a candidate that exists and is not a run folder."""
    from ..audit.scan import another_log

    name = run_name(files)
    passed: list[str] = []
    for n in range(1, 1000):
        folder = base / (name if n == 1 else f"{name}-{n}")
        if not folder.exists() or folder.is_dir() and not any(folder.iterdir()):
            return folder, ("; ".join(passed) or None)
        if not folder.is_dir() or not is_run(folder):
            raise runs.RunError(f"{folder} exists and is not a run folder (no {runs.META}): derivaudit does not write "
                                "into it; move it away, or name the run folder with -o")
        why = another_log(folder, log)
        if why is None:
            return folder, ("; ".join(passed) or None)
        passed.append(f"{folder} holds the audit of another version of this log ({why})")
    raise runs.RunError(f"{base}: no free folder for {name!r} among {name}-2 .. {name}-999; name one with -o")


def latest(base: Path = RUNS) -> tuple[Path, list[Path]]:
    """The most recent run folder under `base` and every run folder there (most recent first).
    RunError when there is none."""
    found = sorted((p for p in base.iterdir() if p.is_dir() and is_run(p)),
                   key=lambda p: (p / runs.META).stat().st_mtime_ns, reverse=True) if base.is_dir() else []
    if not found:
        where = f"{base}/ has no run folder" if base.is_dir() else f"there is no {base}/ folder here"
        raise runs.RunError(f"no RUN given and {where}: make one with `derivaudit scan LOG` (it goes to "
                            f"{base}/<LOG's name>), or name a run folder")
    return found[0], found
