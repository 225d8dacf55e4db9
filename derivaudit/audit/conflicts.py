"""Value conflicts found by arithmetic: the date or the count an obligation asserts against the ones
its own passages give.

Seed 004's refutation: a passage refutes an obligation when both are about the same subject, event
and time and the passage states something else. The judge says which passages are about the
obligation's event (the subset it named for E, checked on its own); whether "in December 2021"
and "last week [the week of 10 January 2022]" can be the same time, or "five strikes" the same
count as "two strikes", is arithmetic, which a 1.5B judge does not do (its slot-check calibration
AUC was 0.34-0.61). So it is done here, deterministically:

- the event's passages: the obligation's own checked E subset where E is yes, else the checked E
  subsets of the other obligations of the same memory in the same view that share a content word
  with it (its facts locate the event: "The marathons were last spring" and "Lena ran marathons");
  none, and nothing is decided;
- time: every date the obligation states ("17 January 2022", "December 2021", "in 2019", "last
  year", "three years ago"; relative phrases against the memory's own time) becomes a calendar
  interval (day, ISO week, month or year), and every date a passage states (relative ones against
  the passage's turn time, as the evidence block shows them) likewise. A conflict is when some of
  the event's passages state a date and none of those dates overlaps the obligation's;
- count: a number the obligation puts on a noun ("five strikes", "ten years") against the numbers
  the event's passages put on the same noun; a conflict is when some do and none is equal.

Seed 004 adds: a later change is an update, not a contradiction. Two values for one event are two
times of it when the history itself says the value changed: a passage that gives the other value
while announcing the change ("we pushed the trip back to June", "the recital was rescheduled"), or
another turn of the view, about the same event, that states the obligation's own value (the
event's value at another time: the memory follows either the change or what held before it). Then
the passages that differ are not about the same time as the obligation and refute nothing (the
obligation is left to its E and R answers). Otherwise the values are the same event at the same
time, and they conflict.

A conflict makes the obligation refuted by those passages (R yes, with them as its subset), and
not implied by them (E no: a passage that gives another date for the event does not show this
one). Phrases that cannot be resolved ("last weekend", "a few days ago", a season), clock times and
approximate counts are left alone: a value not read is never a conflict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from ..log import timeref
from ..log.records import MemoryLog, Write
from . import slots
from .decompose import stems
from .evidence import tokenize

_CLOCK = re.compile(r"^\d{1,2}(?::\d{2})? ?(?:am|pm)$", re.I)
_NUMBERS = {w: i for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                        "nine", "ten", "eleven", "twelve"))}
_NUMBERS.update({"thirteen": 13, "fourteen": 14, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
                 "fifty": 50, "hundred": 100})
_COUNT = re.compile(r"\b(\d+|" + "|".join(_NUMBERS) + r")\s+"
                    r"(?:(?:more|other|new|different|extra|whole|full)\s+)?([a-z]+)\b", re.I)
_APPROX = re.compile(r"\b(?:about|around|roughly|nearly|almost|over|more than|less than|at least|some|"
                     r"a few|several|up to)\s*$", re.I)


@dataclass(frozen=True)
class Interval:
    start: date
    end: date  # inclusive
    said: str  # the words

    def overlaps(self, other: Interval) -> bool:
        return self.start <= other.end and other.start <= self.end


@lru_cache(maxsize=256)
def _absolute_parser(base: datetime):
    from dateparser.date import DateDataParser

    return DateDataParser(languages=["en"], settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past",
                                                      "RETURN_TIME_AS_PERIOD": True})


def _interval(d: date, period: str, said: str) -> Interval:
    if period == "week":
        start = d - timedelta(days=d.weekday())
        return Interval(start, start + timedelta(days=6), said)
    if period == "month":
        nxt = date(d.year + (d.month == 12), d.month % 12 + 1, 1)
        return Interval(date(d.year, d.month, 1), nxt - timedelta(days=1), said)
    if period == "year":
        return Interval(date(d.year, 1, 1), date(d.year, 12, 31), said)
    return Interval(d, d, said)


@lru_cache(maxsize=65536)
def dates(text: str, when: str | None) -> tuple[Interval, ...]:
    """Every date `text` states, as calendar intervals, relative ones resolved against `when` (a
    turn's or a memory's time). Empty when `when` cannot be read."""
    base = timeref.anchor(when)
    if base is None or not text:
        return ()
    resolved = timeref.resolve(text, when)
    out = [_interval(date.fromisoformat(r.date), r.period, r.expression) for r in resolved]
    relative = {r.expression.lower() for r in resolved}
    for said in slots.values(text, "time"):
        words = said.strip()
        if words.lower() in relative or _CLOCK.match(words) or timeref.PATTERN.fullmatch(words):
            continue
        bare = re.sub(r"^(?:in|on|of|during|since)\s+", "", words, flags=re.I)
        data = _absolute_parser(base).get_date_data(bare)
        if data.date_obj is None:
            continue
        period = data.period if data.period in ("week", "month", "year") else "day"
        out.append(_interval(data.date_obj.date(), period, words))
    return tuple(out)


def _singular(word: str) -> str:
    """A count noun without its plural ending, so "two strikes" and "one strike" count one thing (both
    sides are cut the same way; decompose.stems is the wider word-form rule of the reading rules)."""
    w = word.lower()
    for suffix in ("es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def counts(text: str) -> tuple[tuple[int, str, str], ...]:
    """(number, noun stem, words) of every exact count in `text` ("two strikes", "10 years"); an
    approximate one ("about ten years", "a few days") or 'one' as a pronoun is not a count."""
    out = []
    for m in _COUNT.finditer(text):
        num, noun = m.group(1).lower(), m.group(2)
        n = int(num) if num.isdigit() else _NUMBERS[num]
        if _APPROX.search(text[: m.start()]) or slots._is_pronoun(text[: m.start()], m.group(0)):
            continue
        if noun.lower() in ("of", "and", "or", "to", "in", "on", "at", "more", "am", "pm"):
            continue
        out.append((n, _singular(noun), m.group(0)))
    return tuple(out)


# A passage that changes an event's value says so with a verb of changing the event itself: "we
# moved to Boston in May" is a move, not a moved date, so "moved" counts only with an object moved
# to somewhere ("moved it to", "got moved to").
_CHANGE = re.compile(
    r"\b(?:re-?schedul\w*|postpon\w*|delay(?:ed|ing)?|push(?:ed|ing)? (?:\w+ ){0,2}(?:back|forward|to|from|until|till)|"
    r"brought (?:\w+ ){0,2}forward|(?:moved|moving|move|changed|changing|change|switched) "
    r"(?:it|them|(?:the|our|my|his|her|their) \w+) (?:to|from|back)|(?:was|got|been|be|were) "
    r"(?:moved|changed|pushed|shifted) (?:to|back|from)|changed (?:the|its|our|my) (?:date|day|time|plans?))\b",
    re.I)


_TIME_WORDS = ("day", "days", "week", "weeks", "weekend", "month", "months", "year", "years", "ago", "last", "next",
               "today", "yesterday", "tomorrow", "tonight", "morning", "evening", "night", "time", "recently")

_LIGHT_WORDS = ("get", "gets", "got", "gotten", "getting", "have", "has", "had", "having", "do", "does", "did", "done",
                "make", "makes", "made", "go", "goes", "went", "gone", "going", "come", "came", "take", "took",
                "taken", "new", "good", "great", "really", "thing", "things", "lot", "lots")


@dataclass(frozen=True)
class Passage:
    turn_id: str
    text: str
    time: str | None


@dataclass(frozen=True)
class Conflict:
    slot: str  # time | quantity
    value: str  # the obligation's words
    passages: tuple[str, ...]  # turn ids of the passages that state another value
    stated: tuple[str, ...]  # what they state

    def note(self) -> str:
        return (f"{self.slot} check: passages {', '.join(self.passages)} give {'; '.join(self.stated)}, "
                f"not {self.value!r}")

    def to_dict(self) -> dict:
        return {"slot": self.slot, "value": self.value, "passages": list(self.passages), "stated": list(self.stated)}


def conflict(obligation: str, when: str | None, event: Sequence[Passage],
             view: Sequence[Passage] = ()) -> Conflict | None:
    """The time or count conflict between an obligation (stated at time `when`) and the passages
    about its event, or None. `view`: every passage of the view, where a turn that states the
    obligation's own value at another time of the event is looked for (an update, not a conflict)."""
    if not event:
        return None
    own = dates(obligation, when)
    if own:
        def same_time(p: Passage) -> bool:
            return any(d.overlaps(o) for d in dates(p.text, p.time) for o in own)

        stating = [(p, dates(p.text, p.time)) for p in event]
        stating = [(p, ds) for p, ds in stating if ds]
        if (stating and not any(same_time(p) for p, _ in stating)
                and not updated(obligation, [p for p, _ in stating], view, same_time)):
            return Conflict("time", "; ".join(o.said for o in own), tuple(p.turn_id for p, _ in stating),
                            tuple(f"{d.said} [{_shown(d)}]" for _, ds in stating for d in ds))
    for n, noun, said in counts(obligation):
        def same_count(p: Passage, n: int = n, noun: str = noun) -> bool:
            return any(m == n and s == noun for m, s, _ in counts(p.text))

        stating = [(p, [(m, w) for m, s, w in counts(p.text) if s == noun]) for p in event]
        stating = [(p, cs) for p, cs in stating if cs]
        if (stating and not any(m == n for _, cs in stating for m, _ in cs)
                and not updated(obligation, [p for p, _ in stating], view, same_count)):
            return Conflict("quantity", said, tuple(p.turn_id for p, _ in stating),
                            tuple(w for _, cs in stating for _, w in cs))
    return None


def updated(obligation: str, differing: Sequence[Passage], view: Sequence[Passage],
            states_own: Callable[[Passage], bool]) -> bool:
    """Whether the passages that give another value for the event are a later change of it (or the
    value it changed from) rather than the same time: one of them announces the change, or another
    turn of `view`, about the same event, states the obligation's own value (`states_own`)."""
    if any(_CHANGE.search(p.text) for p in differing):
        return True
    others = [p for p in view if p.turn_id not in {d.turn_id for d in differing} and states_own(p)]
    if not others:
        return False
    event = _event_words(obligation) & set().union(*(stems(p.text) for p in differing))
    return any(event & stems(p.text) for p in others)


def _event_words(text: str) -> set[str]:
    """The stems of the words that can name an obligation's event: its content words less names (a
    capitalised word: a name is the subject, shared by every turn about that person; the first word
    is most often one), the words of values (dates, numbers: "last week" is in turns about anything)
    and light verbs ("my place got flooded", "got a new ride")."""
    drop = stems(" ".join([*re.findall(r"\b[A-Z][a-z]+", text), *slots.values(text, "time"), *_NUMBERS,
                           *_TIME_WORDS, *_LIGHT_WORDS]))
    return {w for w in stems(text) - drop if not w.isdigit()}


def later_value(obligation: str, when: str | None, later: Sequence[Passage],
                replacement: Passage | None = None) -> Conflict | None:
    """The lifecycle's update rule: the turns after a memory that give its event's date or count a
    new value (the write audit's rule: a later value is an update). A turn about the event (an
    event word in common) supersedes the obligation's value when it states another one that the
    replacing memory (an update's new version, an invalidation's successor) also states, or, with
    no replacement, while announcing the change; a later turn that states the old value again
    undoes it. The superseding turns, or None."""
    about = [p for p in later if _event_words(obligation) & stems(p.text)]
    own = dates(obligation, when)
    new = [d for d in dates(replacement.text, replacement.time) if not any(d.overlaps(o) for o in own)] \
        if replacement is not None else []
    if own:
        found = _superseding(about, lambda p: list(dates(p.text, p.time)),
                             lambda d: any(d.overlaps(o) for o in own),
                             lambda d: any(d.overlaps(n) for n in new), replacement is None)
        if found:
            return Conflict("time", "; ".join(o.said for o in own), tuple(p.turn_id for p, _ in found),
                            tuple(f"{d.said} [{_shown(d)}]" for _, ds in found for d in ds))
    for n, noun, said in counts(obligation):
        values = {m for m, s, _ in counts(replacement.text) if s == noun and m != n} if replacement else set()
        found = _superseding(about, lambda p, noun=noun: [(m, w) for m, s, w in counts(p.text) if s == noun],
                             lambda c, n=n: c[0] == n, lambda c, values=values: c[0] in values,
                             replacement is None)
        if found:
            return Conflict("quantity", said, tuple(p.turn_id for p, _ in found),
                            tuple(w for _, cs in found for _, w in cs))
    return None


def _superseding(about: Sequence[Passage], read: Callable, is_own: Callable, is_new: Callable,
                 announced: bool) -> list[tuple[Passage, list]]:
    """The turns (with the values they state) that give the event a new value after the last turn
    that states the old one."""
    found: list[tuple[Passage, list]] = []
    for p in about:
        vals = read(p)
        if vals and (any(is_new(v) for v in vals) or (announced and _CHANGE.search(p.text))):
            found.append((p, vals))  # "pushed it from May to June" names the old value too
        elif any(is_own(v) for v in vals):
            found = []  # the old value stated again: it holds
    return found


def write_time(log: MemoryLog, w: Write) -> str | None:
    """A memory's time, which its relative dates are read against: its own, else its write point's
    turn's."""
    conv = log.conversations.get(w.conversation_id)
    seen = conv.turns[conv.position[w.last_seen_turn]] if conv and w.last_seen_turn in conv.position else None
    return w.time or (seen.time if seen else None)


def _shown(d: Interval) -> str:
    if d.start == d.end:
        return d.start.isoformat()
    return f"{d.start.isoformat()}..{d.end.isoformat()}"


def _content(text: str) -> set[str]:
    """Content words in the singular, without the words of dates and counts: what says which event an
    obligation is about ("The marathons were last spring" and "Lena ran marathons" share one)."""
    values = " ".join(slots.values(text, "time") + [w for _, _, w in counts(text)]).lower()
    drop = set(tokenize(values)) | {m.lower() for m in timeref.MONTHS}
    return {_singular(w) for w in tokenize(text) if w not in drop and not w.isdigit()}


def apply(rows: Sequence[dict], texts: dict[str, str], when: str | None, turns: dict[str, Passage]) -> list[dict]:
    """The primitive rows of one memory in one view, with every value conflict settled (see the
    module docstring): R yes over the conflicting passages, E no, the conflict under `conflict`.
    `texts`: obligation id -> text; `when`: the memory's time; `turns`: turn id -> passage."""
    from .labels import answers, settle

    said = {r["obligation_id"]: answers(r) for r in rows}
    out = []
    for row in rows:
        a = said[row["obligation_id"]]
        if a.get("e") and a.get("e_subset"):
            nums = list(a["e_subset"])
        else:
            mine = _content(texts.get(row["obligation_id"], ""))
            nums = sorted({n for oid, b in said.items() if oid != row["obligation_id"] and b.get("e")
                           and mine & _content(texts.get(oid, "")) for n in b.get("e_subset") or []})
        ids = [row["passages"][n - 1] for n in nums if 0 < n <= len(row["passages"])]
        found = conflict(texts.get(row["obligation_id"], ""), when, [turns[t] for t in ids if t in turns],
                         [turns[t] for t in row["passages"] if t in turns])
        if found is None:
            out.append(row)
            continue
        new = settle(row, found.note(), e=False, e_subset=[], r=True,
                     r_subset=sorted(row["passages"].index(t) + 1 for t in found.passages))
        new["conflict"] = found.to_dict()
        out.append(new)
    return out
