"""Progress of long work deep in the library (assembling the embedded model, converting weights),
reported to whoever shows it. The model layer only calls `report`; the CLI installs a terminal
bar (`cli._common`), and a library caller sees nothing unless it sets a reporter of its own.
"""

from __future__ import annotations

from collections.abc import Callable

# (what, done, total, unit): done == total ends that piece of work; unit is "bytes" or "items"
Reporter = Callable[[str, int, int, str], None]

_reporter: Reporter | None = None


def set_reporter(fn: Reporter | None) -> Reporter | None:
    """Install `fn` (None: report nothing); returns the previous reporter."""
    global _reporter
    prev, _reporter = _reporter, fn
    return prev


def report(what: str, done: int, total: int, unit: str = "items") -> None:
    if _reporter is not None:
        _reporter(what, done, total, unit)
