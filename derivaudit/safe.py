"""Making untrusted memory text inert where it is shown or exported: one place for the rules.

Memory text, turn text and ids come from someone else's agent. Before any of it reaches a terminal,
a log line, Markdown, CSV or an SVG label it goes through `visible`, which turns every control
character into a printable escape: ESC (clear screen, window title, OSC 8 links), the other C0 and
C1 controls, DEL, and the bidi overrides and zero-width marks that make a string read differently
from what it is. Rich markup is escaped separately by the terminal layer (`rich.markup.escape`);
HTML by `html.escape`; spreadsheets by `neutralise`; JSON and JSONL by `dumps`, which writes the
same characters as JSON `\\uXXXX` escapes (lossless: a reader decodes the very same string).
"""

from __future__ import annotations

import re
from typing import Any

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# C0 (except tab and newline, kept only where asked), DEL, C1, zero-width marks, bidi embeddings,
# overrides and isolates, line/paragraph separators, BOM.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_UNSAFE_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


# What orjson leaves raw (it escapes C0 itself).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def visible(value: Any, *, newlines: bool = False) -> Any:
    """Control and invisible formatting characters as `\\u001b`-style escapes, so that the text a
    person reads is the text that is there. `newlines=True` keeps tab and newline (multi-line
    cells); a line of a log or an id never keeps them. Non-strings pass through."""
    if not isinstance(value, str):
        return value
    return (_UNSAFE if newlines else _UNSAFE_ALL).sub(_escape, value)


def has_controls(value: str) -> bool:
    """Whether `visible` would change the text (tab and newline aside)."""
    return _UNSAFE.search(value) is not None


def neutralise(value: Any) -> Any:
    """Prefix text that a spreadsheet would run as a formula with a single quote (OWASP CSV injection)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def cell(value: Any) -> Any:
    """A CSV cell: controls made visible, then formulas neutralised."""
    return neutralise(visible(value, newlines=True))


def escape(value: Any) -> str:
    """For a rich console: controls made visible (tab and newline kept), then rich markup escaped."""
    from rich.markup import escape as markup_escape

    return markup_escape(visible(str(value), newlines=True))


def escape_id(value: Any) -> str:
    """An id (or any one-line value) for a rich console: every control character visible, newline
    and tab included (a newline in an id would print as a line break in a table cell)."""
    from rich.markup import escape as markup_escape

    return markup_escape(visible(str(value)))


def html_escape(value: Any) -> str:
    """For HTML and SVG text: controls made visible (XML cannot hold C0 characters), then entities."""
    import html

    return html.escape(visible(str(value), newlines=True))


def dumps(obj: Any, option: int = 0) -> bytes:
    """orjson.dumps, with DEL, the C1 controls, zero-width, bidi and separator characters written
    as JSON escapes (orjson writes them raw: U+009B is a one-byte CSI to some terminals, U+202E
    reverses what a `cat` shows). JSON's structure is ASCII, so these bytes only occur in strings."""
    import orjson

    raw = orjson.dumps(obj, option=option)
    if raw.isascii():
        return raw
    return _JSON_UNSAFE.sub(_escape, raw.decode("utf-8")).encode("utf-8")
