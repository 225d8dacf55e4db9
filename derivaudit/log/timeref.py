"""Relative time in passages, resolved against the passage's own time: "yesterday [7 May 2023]".

A small judge does not do calendar arithmetic, and much of what memory writers get wrong is time
("last year" stored as "this year", a date one day off). Each passage carries its turn's time, so
an expression such as "yesterday", "last Friday", "two weeks ago" or "next month" has one meaning,
and the evidence block shows it beside the words the speaker used. Deterministic: the same turn
always reads the same, in both views, so the views stay comparable.

Which phrases are relative time is decided by a small grammar (below); the arithmetic is
dateparser's (`DateDataParser` with the turn's time as `RELATIVE_BASE`). dateparser's own search
is not used to find phrases: it reads the modal "may" as the month and "for 4 years now" as a date.
A phrase dateparser cannot resolve ("last weekend", "a few days ago"), or a passage whose time
cannot be read, is left as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

_WEEKDAY = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_UNIT = r"day|week|weekend|month|year|night|morning|afternoon|evening"
_NUM = r"\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
PATTERN = re.compile(
    r"(?<!like )(?<!like just )(?<!as if it was )"  # "feels like just yesterday" is not a date
    r"\b(?:the day (?:before yesterday|after tomorrow)"
    r"|yesterday|today|tomorrow|tonight"
    rf"|(?:last|next|this|coming) (?:{_WEEKDAY}|{_UNIT})"
    rf"|(?:{_NUM}) (?:{_UNIT})s? ago"
    rf"|in (?:{_NUM}) (?:{_UNIT})s?)\b",
    re.IGNORECASE,
)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


@dataclass(frozen=True)
class Resolved:
    expression: str  # as written in the passage
    date: str  # ISO date (the day dateparser resolved to)
    period: str  # day | week | month | year
    shown: str  # what the evidence block shows in brackets

    def as_dict(self) -> dict[str, str]:
        return {"expression": self.expression, "date": self.date, "period": self.period, "shown": self.shown}


@lru_cache(maxsize=1)
def _parser_cls():
    from dateparser.date import DateDataParser

    return DateDataParser


@lru_cache(maxsize=4096)
def anchor(when: str | None) -> datetime | None:
    """The turn's time as a naive datetime: ISO 8601 or free text ("1:56 pm on 8 May, 2023"); None
    when it cannot be read."""
    if not when or not str(when).strip():
        return None
    text = str(when).strip()
    try:
        d = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        d = _parser_cls()(languages=["en"], settings={"STRICT_PARSING": False}).get_date_data(text).date_obj
    if d is None:
        return None
    return d.astimezone(UTC).replace(tzinfo=None) if d.tzinfo else d


@lru_cache(maxsize=256)
def _relative_parser(base: datetime):
    """One dateparser parser per turn time (a conversation's session times repeat)."""
    return _parser_cls()(languages=["en"], settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past",
                                                     "RETURN_TIME_AS_PERIOD": True})


def _shown(d: datetime, period: str) -> str:
    day = f"{d.day} {MONTHS[d.month - 1]} {d.year}"
    if period == "year":
        return str(d.year)
    if period == "month":
        return f"{MONTHS[d.month - 1]} {d.year}"
    if period == "week":
        return f"the week of {day}"
    return day


@lru_cache(maxsize=65536)
def _scan(text: str, when: str | None) -> tuple[tuple[int, Resolved], ...]:
    """(end offset, resolution) of every relative time expression in `text` that resolves against `when`."""
    found = list(PATTERN.finditer(text)) if text else []
    base = anchor(when) if found else None  # most passages name no relative time: no parsing at all
    if base is None:
        return ()
    parser = _relative_parser(base)
    out = []
    for m in found:
        data = parser.get_date_data(m.group(0))
        if data.date_obj is None:
            continue
        period = data.period if data.period in ("week", "month", "year") else "day"
        d = data.date_obj
        out.append((m.end(), Resolved(m.group(0), d.date().isoformat(), period, _shown(d, period))))
    return tuple(out)


def resolve(text: str, when: str | None) -> tuple[Resolved, ...]:
    """Every relative time expression in `text` that resolves against `when`, in text order."""
    return tuple(r for _, r in _scan(text, when))


def annotate(text: str, when: str | None) -> str:
    """`text` with each resolved expression followed by its date in brackets."""
    out, pos = [], 0
    for end, r in _scan(text, when):
        out += [text[pos:end], f" [{r.shown}]"]
        pos = end
    return "".join(out) + text[pos:]
