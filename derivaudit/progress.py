"""Progress of long work deep in the library (assembling the embedded model, converting weights),
reported to whoever shows it. The model layer only calls `report`; the CLI installs a terminal
bar (`cli._common`), and a library caller sees nothing unless it sets a reporter of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

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


def in_parts(what: str, items: Sequence[T], call: Callable[[list[T]], list[Any]], size: int = 16) -> list[Any]:
    """`call` over `items` in parts of `size`, reporting progress after each part: long model work
    shows where it is, and a batching engine still gets `size` prompts at a time."""
    out: list[Any] = []
    for i in range(0, len(items), size):
        out += call(list(items[i:i + size]))
        report(what, len(out), len(items))
    return out
