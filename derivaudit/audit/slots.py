"""Slots: the time, place, quantity or person an obligation asserts, found in its words.

A 1.5B judge answers "is it false?" poorly and "does this passage give a *different* date (count,
place, person) for the same event?" well (DerivAudit's refutation rule: same subject, event
and time, something else stated). The slot check asks the second question, and it needs to know
which value the obligation asserts. That is read from the text, deterministically, because the
decomposer's subtype is often wrong ("QUALIFIER (modality): The printing was done on 17 January
2022"; "FACT: February 2023 is the month Andrew started his job"): a date is a time whatever the
line was typed as. The subtype adds only what text cannot show: an attribution qualifier names a
person.

`perturb` changes a value into a different one of the same slot (5 -> 7, May -> August, last
year -> this year): calibration items for the check are built from the log's own passages with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..log.timeref import MONTHS
from ..log.timeref import PATTERN as RELATIVE

SLOTS = ("time", "place", "quantity", "person")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve", "thirteen", "fourteen", "fifteen", "twenty", "thirty", "forty", "fifty",
                 "hundred", "dozen")
_MONTH = "|".join(MONTHS)
_SEASON = r"spring|summer|autumn|fall|winter"
# An absolute or calendar time: "17 January 2022", "January 17", "February 2023", "in 2019",
# "on Friday", "last summer", plus every relative phrase the resolver knows ("two weeks ago").
_TIME = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH})(?:,? \d{{4}})?"
    rf"|(?:{_MONTH}) \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?"
    rf"|(?:early |late |mid-?)?(?:{_MONTH})(?: \d{{4}})?"
    r"|(?:in|since|during|of) (?:19|20)\d{2}"
    rf"|(?:on |last |next |this )?(?:{'|'.join(_WEEKDAYS)})"
    rf"|(?:last|next|this|in the) (?:{_SEASON})"
    r"|\d{1,2}(?::\d{2})? ?(?:am|pm))\b",
    re.IGNORECASE,
)
_QUANTITY = re.compile(
    rf"\b(?:\d+(?:[.,]\d+)?|{'|'.join(_NUMBER_WORDS)})(?:[ -](?:{'|'.join(_NUMBER_WORDS)}))?"
    r"(?: (?:more |other |new |different )?[a-z]+)?\b",
    re.IGNORECASE,
)
# "in Boston", "at Fox Hollow", "near Lake Tahoe": a capitalised name after a place preposition.
_PLACE = re.compile(r"\b(?:in|at|near|from) ((?:the )?[A-Z][\w'-]*(?: [A-Z][\w'-]*)*)")
_NAME = re.compile(r"\b[A-Z][a-z][\w'-]*")


@dataclass(frozen=True)
class Slot:
    name: str  # time | place | quantity | person
    value: str  # the obligation's words that fill it

    def to_dict(self) -> dict[str, str]:
        return {"slot": self.name, "value": self.value}


def _not_time_word(word: str) -> bool:
    w = word.strip().split()[-1].capitalize() if word.strip() else ""
    return w not in MONTHS and w not in _WEEKDAYS


def find(text: str, subtype: str | None = None, names: Iterable[str] = ()) -> Slot | None:
    """The slot an obligation asserts, or None. Time first (a date also holds numbers), then a
    quantity (a number not inside a time), then a place; a person only for an attribution
    qualifier, naming someone other than the conversation's speakers (`names`)."""
    times = [m.group(0) for m in _TIME.finditer(text)] + [m.group(0) for m in RELATIVE.finditer(text)]
    times = [t for t in times if not _modal_may(text, t)]
    if times:
        return Slot("time", max(times, key=len))
    for m in _QUANTITY.finditer(text):
        if not _is_pronoun(text[: m.start()], m.group(0)):
            return Slot("quantity", m.group(0))
    speakers = {n.lower() for n in names}
    for m in _PLACE.finditer(text):
        place = m.group(1)
        if _not_time_word(place) and place.lower().removeprefix("the ") not in speakers:
            return Slot("place", place)
    if subtype == "attribution":
        people = [n for n in _NAME.findall(text)[1:] if n.lower() not in speakers and _not_time_word(n)]
        if people:
            return Slot("person", people[0])
    return None


def values(text: str, name: str) -> list[str]:
    """Every value of slot `name` in a text (time and quantity only: the slots a passage states
    in a form that can be read without knowing the event)."""
    if name == "time":
        return [m.group(0) for pat in (_TIME, RELATIVE) for m in pat.finditer(text) if not _modal_may(text, m.group(0))]
    if name == "quantity":
        return [m.group(0) for m in _QUANTITY.finditer(text) if not _is_pronoun(text[: m.start()], m.group(0))]
    return []


def _modal_may(text: str, found: str) -> bool:
    """'may' as a verb ("she may move") is not the month."""
    if found.lower() != "may":
        return False
    return not re.search(r"\bMay\b", text)


_DETERMINER = re.compile(r"\b(?:the|that|this|any|each|every|no|which|some|another|a)\s*$", re.I)


def _is_pronoun(before: str, phrase: str) -> bool:
    """'one' as a pronoun ("the one she liked", "one of her friends", "one day") is not a count."""
    words = phrase.lower().split()
    if words[0] != "one":
        return False
    return bool(_DETERMINER.search(before)) or len(words) == 1 or words[1] in (
        "of", "day", "she", "he", "they", "i", "we", "you", "that", "which", "who", "more", "another")


# -------------------------------------------------------------- different values, for calibration

_SWAP_RELATIVE = {"yesterday": "last month", "today": "last year", "tomorrow": "next year",
                  "last": "next", "next": "last", "this": "last"}


def perturb(slot: Slot) -> str | None:
    """A different value for the same slot (deterministic), or None when none is made: numbers
    move by two (years by one), months by three, weekdays by two, 'last' and 'next' swap."""
    v = slot.value
    if slot.name not in ("time", "quantity"):
        return None
    out = re.sub(r"\b(?:19|20)\d{2}\b", lambda m: str(int(m.group(0)) - 1), v)
    if out == v:
        out = re.sub(r"\b\d+\b", lambda m: str(int(m.group(0)) + 2), v, count=1)
    if out == v:
        out = _swap_word(v, MONTHS, 3)
    if out == v:
        out = _swap_word(v, _WEEKDAYS, 2)
    if out == v:
        out = _swap_word(v, _NUMBER_WORDS[:12], 2)
    if out == v:
        first, _, rest = v.partition(" ")
        alt = _SWAP_RELATIVE.get(first.lower())
        if alt:
            out = f"{alt} {rest}".strip() if rest and first.lower() in ("last", "next", "this") else alt
    return out if out != v else None


def _swap_word(text: str, words: tuple[str, ...], step: int) -> str:
    pat = re.compile(r"\b(" + "|".join(words) + r")\b", re.IGNORECASE)
    m = pat.search(text)
    if not m:
        return text
    i = [w.lower() for w in words].index(m.group(1).lower())
    new = words[(i + step) % len(words)]
    new = new.capitalize() if m.group(1)[0].isupper() else new.lower()
    return text[: m.start()] + new + text[m.end():]
