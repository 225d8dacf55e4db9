"""MemTrim whole (the MemTrim paper §3, App. A.1): canonical values, grounding, the parser's retry and
drop rules, key equivalence, the trie kept with the run and used at read time."""

from __future__ import annotations

import json

import pytest

from derivaudit.readpath.memtrim import (
    EvidenceIndex,
    Parser,
    Structured,
    Unit,
    canonical_value,
    grounded,
    trim,
)

from .scripted import Scripted


def reply(units, task="none", answer=None):
    return json.dumps({"task": task, "answer": answer, "units": [
        {"entity": e, "attribute": a, "value": v, "type": t, "span": s, "supports_answer": sup}
        for e, a, v, t, s, sup in units]})


def test_values_take_one_form_per_type():
    assert canonical_value("Yes", "boolean") == "true" and canonical_value("closed", "boolean") == "false"
    assert canonical_value("three years", "number") == "3" and canonical_value("1,200", "number") == "1200"
    assert canonical_value("May 7, 2023", "time", "2023-06-01") == "2023-05-07"
    assert canonical_value("The Berlin Marathon", "category") == "berlin marathon"


def test_a_unit_is_grounded_only_in_its_own_source():
    text = "Maya ran the Berlin marathon three years ago."
    assert grounded("Berlin marathon", "ran the Berlin marathon", text)
    assert not grounded("Boston marathon", "ran the Berlin marathon", text)  # value not in the text
    assert not grounded("Berlin marathon", "ran the Berlin race", text)  # span not in the text
    assert grounded("3", "three years ago", text, "number")  # the same number, written out


def test_the_parser_retries_once_then_drops_ungrounded_units_and_counts_them():
    text = "Highway 5 is closed today."
    bad = reply([("Highway 5", "status", "closed", "boolean", "Highway 5 is closed", True),
                 ("Highway 5", "weather", "sunny", "text", "sunny skies", False)])
    be = Scripted({text: [bad, bad], "Not a memory.": ["nope", "still nope"]})
    p = Parser(be)
    m, failed = p.parse([("m1", text, None), ("m2", "Not a memory.", None)])
    assert m.units == {Unit("highway_5.status", "false")}  # "closed" as a boolean; the weather dropped
    assert p.counts.retried == 2 and p.counts.ungrounded == 1 and p.counts.failed == 1 and p.counts.parsed == 1
    retry = [x.task for x in be.generated if "previous reply was not valid" in x.task]
    assert len(retry) == 2 and "sunny" in retry[0]  # the problem is named in the second request
    assert failed.units == frozenset() and failed.outcome is None  # nothing reused from a failed parse
    assert set(p.index.memories) == {"m1", "m2"} and p.index.values("highway_5.status") == {"false": {"m1"}}


def test_an_equivalent_key_merges_into_the_existing_one_and_others_stay_apart():
    a, b, c = "Highway 5 is closed.", "Highway 5 has been shut, says the radio.", "The visitor center is open."
    be = Scripted({
        a: [reply([("Highway 5", "status", "closed", "boolean", "Highway 5 is closed", True)])],
        b: [reply([("Highway 5", "state", "shut", "boolean", "Highway 5 has been shut", True)])],
        c: [reply([("visitor center", "status", "open", "boolean", "The visitor center is open", True)])]},
        same={("highway 5 state", "highway 5 status")})
    p = Parser(be)
    p.parse([("a", a, None), ("b", b, None), ("c", c, None)])
    assert p.counts.merged_keys == 1
    # "shut" is not a boolean word, so it stays a value of its own under the merged key
    assert set(p.index.nodes["highway_5.status"]) == {"false", "shut"}
    assert "visitor_center.status" in p.index.nodes  # another entity: never compared, never merged


def test_the_trie_is_kept_with_the_run_and_used_at_read_time():
    idx = EvidenceIndex()
    m1 = Structured("m1", frozenset({Unit("club", "psg"), Unit("person", "messi"), Unit("position", "forward")}),
                    "club_country", "France", frozenset({Unit("club", "psg"), Unit("person", "messi")}))
    m2 = Structured("m2", frozenset({Unit("club", "inter miami"), Unit("league", "mls")}), None, None)
    for m in (m1, m2):
        idx.add(m)
    again = EvidenceIndex.from_dict(json.loads(json.dumps(idx.to_dict())))
    assert again.nodes == idx.nodes and again.memories == idx.memories
    q = Structured("q", frozenset({Unit("person", "messi"), Unit("club", "inter miami")}), "club_country")
    t = trim(q, [again.memories["m1"]], again)  # only m1 retrieved: m2's matching unit is not looked at
    assert t.shared == {"m1": [Unit("person", "messi")]} and t.conflicting == {"m1": [Unit("club", "psg")]}
    assert t.outcomes == {"m1": "suppress"} and t.context == [Unit("position", "forward")]
    both = trim(q, [again.memories["m1"], again.memories["m2"]], again)
    assert both.shared["m2"] == [Unit("club", "inter miami")] and Unit("league", "mls") in both.context


def test_a_saved_trie_is_reused_and_a_bad_one_is_refused(fixtures, tmp_path):
    from derivaudit import load_log
    from derivaudit.readpath.answers import replay_answers
    from derivaudit.readpath.memtrim import load_index
    from derivaudit.safe import dumps

    log = load_log(fixtures / "echo_answers.jsonl")  # no evidence units logged: every memory is parsed
    first = Scripted()
    res = replay_answers(log, first, first, methods=("none", "memtrim"))
    parses = [p for p in first.generated if "evidence units" in p.task and "previous reply" not in p.task]
    retrieved = {i for r in log.reads if r.expected for i in r.retrieved[:5]}
    assert len(parses) == len(retrieved) + 4  # each retrieved memory once, at write time, then 4 queries
    (tmp_path / "trie.json").write_bytes(dumps(res["memtrim"]["index"]))
    again = Scripted()
    replay_answers(log, again, again, methods=("none", "memtrim"), index=load_index(tmp_path / "trie.json"))
    assert len([p for p in again.generated if "evidence units" in p.task and "previous reply" not in p.task]) == 4
    (tmp_path / "bad.json").write_text('{"memories": {"w1": {"ident": "w1", "units": [["k"]]}}}')
    with pytest.raises(ValueError, match=r"bad.json: \$.memories\['w1'\].units"):
        load_index(tmp_path / "bad.json")


@pytest.mark.slow
def test_every_unit_the_suites_model_keeps_is_grounded_in_its_memory():
    """The parser on a real model: whatever it replies, a kept unit's value is read in its memory
    (its words, or a number or date in canonical form), and every memory is counted once."""
    import re

    from derivaudit.audit.evidence import tokenize
    from derivaudit.models import ModelPool, ModelSpec

    items = [("m1", "Caroline went to the LGBTQ support group on 7 May 2023.", "2023-05-08"),
             ("m2", "Melanie has two kids and painted a lake sunrise last year.", "2023-05-08")]
    with ModelPool() as pool:
        p = Parser(pool.get(ModelSpec()))
        ms = p.parse(items)
    assert p.counts.parsed + p.counts.failed == 2 and set(p.index.memories) == {"m1", "m2"}
    for m, (_, text, _) in zip(ms, items, strict=True):
        for u in m.units:
            assert set(tokenize(u.value)) <= set(tokenize(text)) or re.fullmatch(r"[\d.\-]+", u.value) \
                or u.value in ("true", "false"), (u, text)
