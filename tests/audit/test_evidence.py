"""Evidence views: the rules of DerivAudit §3.1 / App. D, on fixtures and on random logs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from derivaudit import EvidenceSettings, build_views, load_log, tokenize
from derivaudit.audit.evidence import ConversationIndex
from derivaudit.log.io import check_rows


def test_tokenize_documented_rules():
    assert tokenize("The user MOVED to Boston, because of the new job!") == ["user", "moved", "boston", "new", "job"]
    assert tokenize("I'm Sam's partner") == ["im", "sams", "partner"]
    assert tokenize("...") == []


def views_by_id(log, **kw):
    return {v.write.write_id: v for v in build_views(log, EvidenceSettings(**kw))}


def test_split_support_is_found_by_expansion(fixtures):
    log = load_log(fixtures / "memories.jsonl")
    v = views_by_id(log)["boston-2"]  # cites t3 ("accepted the job"); the move is in uncited t5
    assert [t.turn_id for t in v.citation_only] == ["t3"]
    ids = [t.turn_id for t in v.expanded]
    assert "t5" in ids and "t3" in ids
    assert "t5" in v.retrieved and "t3" not in v.retrieved
    # the write point is t6: nothing later may appear
    assert all(t.order <= 5 for t in v.expanded)


def test_view_dict_marks_nothing_in_passages(fixtures):
    log = load_log(fixtures / "memories.jsonl")
    d = views_by_id(log)["academy-2"].to_dict()
    for p in d["expanded"]:
        assert set(p) == {"turn_id", "order", "speaker", "text", "time", "session"}
    assert d["provenance"]["cited"] == ["s3"]
    assert set(d["provenance"]["retrieved"]) <= {p["turn_id"] for p in d["expanded"]}


def _conv_rows(n_turns: int, text_of) -> list[dict]:
    return [{"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i, "speaker": "A",
             "text": text_of(i)} for i in range(n_turns)]


def test_search_limited_only_when_cap_hit_with_relevant_leftovers():
    # 30 turns all about apples: more relevant passages than the budget -> search-limited
    rows = _conv_rows(30, lambda i: f"apple orchard visit number {i}")
    rows.append({"type": "write", "write_id": "w", "conversation_id": "c", "text": "visits the apple orchard",
                 "citations": ["t0"], "last_seen_turn": "t29"})
    log, problems = check_rows("mem", rows)
    assert not problems
    v = next(build_views(log))
    assert len(v.retrieved) == 12 and len(v.expanded) == 13
    assert v.search_limited
    # only 3 turns mention the query terms: cap never hit -> not limited
    rows2 = _conv_rows(30, lambda i: "apple orchard" if i < 3 else f"weather talk {i}")
    rows2.append({**rows[-1]})
    log2, _ = check_rows("mem", rows2)
    v2 = next(build_views(log2))
    assert v2.retrieved == ("t1", "t2") and not v2.search_limited

def test_search_limited_floor():
    # 13 strong matches (t0 cited + 12 retrieved) and 17 weak ones that share only "apple":
    # the cap is hit, but what is left out scores far below the top.
    rows = _conv_rows(30, lambda i: "apple orchard cider press" if i < 13 else f"apple weather chat {i}")
    rows.append({"type": "write", "write_id": "w", "conversation_id": "c", "text": "apple orchard cider press",
                 "citations": ["t0"], "last_seen_turn": "t29"})
    log, _ = check_rows("mem", rows)
    strict = next(build_views(log, EvidenceSettings(limit_floor=0.5)))
    assert strict.retrieved == tuple(f"t{i}" for i in range(1, 13))
    assert not strict.search_limited
    assert next(build_views(log, EvidenceSettings(limit_floor=0.01))).search_limited


def test_no_query_terms_or_empty_budget():
    rows = _conv_rows(5, lambda i: f"alpha {i}")
    rows.append({"type": "write", "write_id": "w", "conversation_id": "c", "text": "the and of",
                 "citations": [], "last_seen_turn": "t4"})
    log, _ = check_rows("mem", rows)
    v = next(build_views(log))
    assert v.citation_only == () and v.expanded == () and not v.search_limited
    idx = ConversationIndex(log.conversations["c"])
    w = log.writes[0]
    assert idx.views(w, EvidenceSettings(max_retrieved=0)).expanded == ()


# ---------------------------------------------------------------- property tests

WORDS = ["apple", "boston", "job", "move", "cello", "sam", "garden", "chef", "club", "knee", "the", "a"]


@st.composite
def random_logs(draw):
    rows: list[dict] = []
    n_conv = draw(st.integers(1, 3))
    for c in range(n_conv):
        n = draw(st.integers(1, 40))
        orders = draw(st.permutations(list(range(n * 3))))[:n]
        for i in range(n):
            words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
            rows.append({"type": "turn", "conversation_id": f"c{c}", "turn_id": f"c{c}t{i}",
                         "order": orders[i], "speaker": "S", "text": " ".join(words)})
        by_order = sorted(range(n), key=lambda i: orders[i])
        for k in range(draw(st.integers(0, 6))):
            point = draw(st.integers(0, n - 1))
            pre = [f"c{c}t{i}" for i in by_order[: point + 1]]
            cites = draw(st.lists(st.sampled_from(pre), unique=True, max_size=min(16, len(pre))))
            text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)))
            rows.append({"type": "write", "write_id": f"c{c}w{k}", "conversation_id": f"c{c}", "text": text,
                         "citations": cites, "last_seen_turn": f"c{c}t{by_order[point]}"})
    return rows


@settings(max_examples=150, deadline=None)
@given(random_logs(), st.integers(0, 12), st.integers(1, 16), st.floats(0, 1))
def test_view_invariants(rows, max_retrieved, max_passages, floor):
    log, problems = check_rows("random", rows)
    assert problems == []
    es = EvidenceSettings(max_retrieved=max_retrieved, max_passages=max(max_passages, 16), limit_floor=floor)
    for v in build_views(log, es):
        conv = log.conversations[v.write.conversation_id]
        point = conv.turns[conv.position[v.write.last_seen_turn]].order
        cited = set(v.write.citations)
        for view in (v.citation_only, v.expanded):
            orders = [t.order for t in view]
            assert all(o <= point for o in orders), "post-write turn in a view"
            assert orders == sorted(orders) and len(set(orders)) == len(orders), "not in time order"
            assert len(view) <= 16
            assert cited <= {t.turn_id for t in view}, "a cited passage is missing"
        assert {t.turn_id for t in v.citation_only} == cited
        assert set(v.citation_only) <= set(v.expanded)
        assert len(v.retrieved) <= es.max_retrieved
        assert set(v.retrieved).isdisjoint(cited)
        assert {t.turn_id for t in v.expanded} == cited | set(v.retrieved)
        if v.search_limited:
            assert len(v.retrieved) == min(es.max_retrieved, 16 - len(cited))


def test_views_from_a_spilled_log_equal_views_from_memory(fixtures, tmp_path):
    """`views` reads the log one conversation at a time from a temporary SQLite file; a log whose
    conversations interleave comes out in input order all the same."""
    from derivaudit.log.spill import SpilledLog

    log = load_log(fixtures / "memories.jsonl")
    a = [v.to_dict() for v in build_views(log)]
    with SpilledLog([fixtures / "memories.jsonl"]) as spilled:
        assert spilled.write_ids == [w.write_id for w in log.writes]
        b = [v.to_dict() for v in build_views(spilled)]
        some = {log.writes[-1].write_id, log.writes[0].write_id}
        c = [v.to_dict() for v in build_views(spilled, write_ids=some)]
    assert a == b and len(a) == len(log.writes)
    assert c == [x for x in a if x["write_id"] in some]
    # interleave: every write moved to the end of the file, in reverse order
    lines = (fixtures / "memories.jsonl").read_text().splitlines()
    writes = [x for x in lines if '"type": "write"' in x or '"type":"write"' in x]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([x for x in lines if x not in writes] + writes[::-1]) + "\n")
    expect = [v.to_dict() for v in build_views(load_log(mixed))]
    with SpilledLog([mixed]) as spilled:
        got = [v.to_dict() for v in build_views(spilled)]
    assert got == expect and [x["write_id"] for x in got] == [x["write_id"] for x in a][::-1]


def test_the_search_limited_share_is_counted_as_views_stream(fixtures):
    from derivaudit import build_views, load_log
    from derivaudit.audit.evidence import LimitedTally

    log = load_log(fixtures / "memories.jsonl")
    tally = LimitedTally(len(log.writes))
    views = [tally.add(v) for v in build_views(log)]
    assert tally.limited == sum(v.search_limited for v in views) and tally.share == tally.limited / len(views)
    assert tally.describe(0.5).startswith(f"{len(views)} writes; search-limited: {tally.limited} (")
    assert LimitedTally(0).share == 0.0


def _conversation(later: int) -> list[dict]:
    """Ten pre-write turns (two rank close for the record's words) and `later` turns after the
    write point that repeat one of those words, which would move its IDF."""
    texts = ["Mia bought a red kayak at the harbour shop.", "The harbour was busy with tourists today.",
             "Mia paddled her kayak to the island.", "We had soup for dinner.", "The shop sells kayak paddles.",
             "Tom fixed the fence.", "Rain all day again.", "The island ferry was late.",
             "Mia wants a second kayak for Tom.", "Dinner at the harbour restaurant."]
    texts += [f"Another harbour story, number {i}." for i in range(later)]
    return [{"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i, "speaker": "Mia", "text": t}
            for i, t in enumerate(texts)]


def test_a_turn_after_the_write_never_changes_its_expanded_view():
    """DerivAudit's views are pre-write all the way down: BM25's statistics (IDF, average length)
    are the history the writer saw, so what is said after the memory cannot move which earlier
    turns are found or their scores."""
    write = {"type": "write", "write_id": "w", "conversation_id": "c", "text": "Mia keeps her kayak at the harbour.",
             "citations": ["t0"], "last_seen_turn": "t9"}
    settings = EvidenceSettings(max_retrieved=2, max_passages=3)
    seen = []
    for later in (0, 5, 40):
        log, problems = check_rows("c.jsonl", [*_conversation(later), write])
        assert problems == []
        v = ConversationIndex(log.conversations["c"]).views(log.writes[0], settings)
        seen.append((v.retrieved, v.bm25, v.search_limited))
    assert seen[0] == seen[1] == seen[2], seen


def test_prefix_statistics_are_rank_bm25s_own_on_the_prefix():
    """The scores are BM25Okapi's over the turns up to the write point, whatever came before in
    the index (earlier, later or repeated write points)."""
    from rank_bm25 import BM25Okapi

    rows = _conversation(30)
    writes = [{"type": "write", "write_id": f"w{p}", "conversation_id": "c", "text": "kayak harbour island shop",
               "citations": ["t0"], "last_seen_turn": f"t{p}"} for p in (9, 3, 25, 9, 39)]
    log, _ = check_rows("c.jsonl", [*rows, *writes])
    index = ConversationIndex(log.conversations["c"])
    for w in log.writes:
        v = index.views(w, EvidenceSettings(max_retrieved=4, max_passages=5))
        point = int(w.last_seen_turn[1:])
        docs = [tokenize(r["text"]) for r in rows[: point + 1]]
        ref = BM25Okapi(docs)
        cand = [int(t[1:]) for t in v.bm25]
        want = dict(zip(cand, ref.get_batch_scores(tokenize(w.text), cand), strict=True))
        assert {int(t[1:]): s for t, s in v.bm25.items()} == {i: round(float(s), 4) for i, s in want.items()}
