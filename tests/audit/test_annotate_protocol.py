"""The D/E/R decisions: null-evidence contrast, checked subsets (a wrong one refused on rescoring,
"none" handled), thresholds. A rule-based verifier makes the right answer known."""

from derivaudit.audit.annotate import Annotator, Item, annotate, lexical_subset, parse_subset
from derivaudit.audit.decompose import Obligation
from derivaudit.log.records import Turn, Write

from ..rule_backend import RuleBackend

T = [Turn("c", "t1", 0, "Ann", "We had lunch at noon."), Turn("c", "t2", 1, "Ann", "Ann adopted a grey cat."),
     Turn("c", "t3", 2, "Bo", "Nice weather today.")]
W = Write("w", "c", "Ann adopted a grey cat.", ("t2",), "t3")


def _item(text: str) -> Item:
    return Item(Obligation("w#o1", "w", "fact", None, text), W, "expanded", T)


def _run(subset_answer: str, text: str = "Ann adopted a grey cat.", thresholds=None):
    be = RuleBackend(subset_answer)
    a = Annotator("A", be, "a", dict(thresholds or {}))
    b = Annotator("B", be, "b", dict(thresholds or {}))
    (x,) = annotate([_item(text)], a, b, Annotator("adjudicator", be, "a"))
    return x, be


def test_a_right_subset_keeps_the_yes():
    x, be = _run("2")
    assert x.final.e is True and x.final.e_subset == [2] and x.label == "supported"
    assert x.final.scores["e_subset"] > 0 and x.final.scores["e"] > x.final.scores["e_null"]
    assert any("Passages from a conversation" in p.shared and "Ann adopted a grey cat." not in p.shared.split(
        "[2]")[0] for p in be.seen if p.shared)  # E/R over the passages alone: no record before them


def test_a_wrong_subset_is_refused_on_rescoring():
    # implied by all three passages together, by no proper subset: the named passage 1 is refused,
    # and so is the lexical candidate (two passages)
    x, _ = _run("1", text="Ann adopted a grey cat at lunch in nice weather.")
    assert x.final.scores["e"] > 0 and x.final.e is False and x.label == "insufficient"
    notes = " ".join(x.final.notes)
    assert "passages [1] alone do not imply it" in notes and "closest in wording" in notes
    assert notes.endswith("not a yes")


def test_the_closest_passages_rescue_a_misnamed_subset():
    x, be = _run("1")  # passage 1 (lunch) alone does not imply the cat; passages 2 and 1 do
    assert x.final.e is True and x.label == "supported" and 2 in x.final.e_subset
    assert any("passages [1] alone do not imply it" in n for n in x.final.notes)


def test_a_one_passage_view_is_its_own_subset_and_the_subset_is_not_asked():
    # the annotator names a passage that does not exist (what a 1.5B judge does on one-turn views):
    # with one passage there is one subset, so nothing is generated and the yes stands on [1]
    be = RuleBackend("2")
    a, b = Annotator("A", be, "a", {}), Annotator("B", be, "b", {})
    it = Item(Obligation("w#o1", "w", "fact", None, "Ann adopted a grey cat."), W, "citation_only", T[1:2])
    (x,) = annotate([it], a, b, Annotator("adjudicator", be, "a"))
    assert x.final.e is True and x.final.e_subset == [1] and x.label == "supported"
    assert not any("do not exist" in n for n in x.final.notes)
    assert not be.generated  # no subset was asked for
    # nor rescored: the subset is the whole view, whose E score (A's and B's) is reused
    assert x.final.scores["e_subset"] == x.final.scores["e"]
    assert sum(p.shared == it.shared for p in be.seen) == 4  # E and R, by A and by B, once each
    # over two passages the same answer is still an error, and the yes is lost
    x, _ = _run("7")
    assert x.final.e is False and any("do not exist" in n for n in x.final.notes)


def test_lexical_subset():
    it = _item("Ann adopted a grey cat.")
    assert lexical_subset(it, 1) == [2] and lexical_subset(it, 3) == [1, 2]  # never the whole view
    assert lexical_subset(Item(it.obligation, W, "expanded", T[1:2]), 3) == []


def test_none_means_no():
    assert parse_subset("none", 3) == [] and parse_subset("None of them.", 3) == []
    x, _ = _run("none")
    assert x.final.e is False and any("named no implying passage" in n for n in x.final.notes)


def test_unsupported_statement_and_threshold():
    x, _ = _run("2", text="Ann adopted a black dog.")
    assert x.final.e is False and x.label == "insufficient"
    x, _ = _run("2", thresholds={"e": 5.0, "r": 5.0})  # a threshold above every score: nothing is a yes
    assert x.final.e is False and x.label == "insufficient"


def test_the_adjudicator_only_settles_the_primitives_in_dispute():
    from derivaudit.audit.annotate import Primitives, settle_agreed

    a = Primitives(True, True, False, e_subset=[2])
    b = Primitives(True, False, False)
    adj = Primitives(False, True, True, e_subset=[1], r_subset=[3])
    settle_agreed(adj, a, b)
    assert (adj.d, adj.e, adj.r) == (True, True, False)  # D and R agreed; E was in dispute: the adjudicator's
    assert adj.e_subset == [1] and adj.r_subset == []
    assert any(n.startswith("D: A and B agree") for n in adj.notes)


def test_the_adjudicators_d_question_is_evidence_blind():
    """Its D question shows the assessments' D answers only, never their E/R answers or subsets."""
    from derivaudit.audit.annotate import Primitives, adjudicate

    be = RuleBackend("2")
    a = Primitives(True, True, False, e_subset=[2])
    b = Primitives(False, False, True, r_subset=[1])
    adjudicate([_item("Ann adopted a grey cat.")], [a], [b], Annotator("adjudicator", be, "a"))
    d_tasks = [p.task for p in be.seen if not p.shared]
    assert d_tasks and all("Assessment 1: determinate:" in t for t in d_tasks)
    assert not any("implied" in t or "passages 2" in t for t in d_tasks)
    assert any("implied true: yes (passages 2)" in p.task for p in be.seen if p.shared)  # E/R still see both


def test_null_evidence_is_asked_only_of_a_score_that_clears_the_threshold():
    from derivaudit.audit.annotate import null_passages, passages_block

    x, be = _run("2")  # E clears (+4), R does not (-4): E alone meets the null question, per annotator
    null = passages_block(null_passages(len(T)))
    asked = [p for p in be.seen if p.shared == null]
    assert len(asked) == 2 and all(p.verdict[0] == ("yes",) for p in asked)
    assert "e_null" in x.a.scores and "r_null" not in x.a.scores
    assert x.final.e is True and x.final.r is False  # same decisions as asking everything
    _, be = _run("2", thresholds={"e": 5.0, "r": 5.0})  # nothing clears: no null question at all
    assert not [p for p in be.seen if p.shared == null]


def test_the_adjudicator_is_asked_only_the_primitives_in_dispute():
    from derivaudit.audit.annotate import Primitives, adjudicate

    be = RuleBackend("2")
    a = Primitives(True, True, False, e_subset=[2])
    b = Primitives(True, False, False)  # D and R agree; E is in dispute
    (adj,) = adjudicate([_item("Ann adopted a grey cat.")], [a], [b], Annotator("adjudicator", be, "a"))
    assert be.seen and not [p for p in be.seen if not p.shared]  # no D question
    assert not [p for p in be.seen if p.verdict != (("yes",), ("no",))]  # no three-way R question
    assert (adj.d, adj.e, adj.r) == (True, True, False) and adj.e_subset == [2]
    assert not any("agree" in n for n in adj.notes)  # nothing was overruled: the agreed ones were not asked


# ------------------------------------------------------------- the slot check

DOGS = [Turn("c", "d1", 0, "Audrey", "I have had my dogs for three years now."),
        Turn("c", "d2", 1, "Andrew", "Nice weather for a walk today.")]


def _slot_run(text: str, subset_answer: str = "1", thresholds=None, kind=("qualifier", "quantity")):
    be = RuleBackend(subset_answer)
    w = Write("w", "c", text, ("d1",), "d2")
    it = Item(Obligation("w#o1", "w", kind[0], kind[1], text), w, "expanded", DOGS)
    a, b = (Annotator(r, be, v, dict(thresholds or {})) for r, v in (("A", "a"), ("B", "b")))
    (x,) = annotate([it], a, b, Annotator("adjudicator", be, "a"))
    return x, be


def test_a_different_value_in_the_same_event_is_a_contradiction():
    x, be = _slot_run("Audrey has had her dogs for five years.")
    f = x.final
    assert f.e is False and f.s is True and f.r is True and x.label == "contradicted"
    assert f.s_subset == [1] and f.r_subset == [1]  # the closest passage, alone
    assert any("different quantity than 'five years'" in n for n in f.notes)
    asked = [p for p in be.seen if "Its quantity: five years" in p.task]
    assert asked and all("three years" in p.shared and "walk" not in p.shared for p in asked if "Audrey" in p.shared)
    assert f.scores["s"] > f.scores["s_null"]  # it beat null evidence of the same length


def test_the_same_value_is_no_contradiction_and_is_asked_on_the_e_subset():
    x, be = _slot_run("Audrey has had her dogs for three years.")
    f = x.final
    assert f.e is True and f.s is False and f.r is False and x.label == "supported"
    assert f.s_subset == f.e_subset == [1]


def test_no_slot_no_check_and_a_threshold_above_every_score_says_no():
    x, be = _slot_run("Audrey has dogs.", kind=("fact", None))
    assert x.final.s is None and not any("Its " in p.task for p in be.seen)
    x, _ = _slot_run("Audrey has had her dogs for five years.", thresholds={"s": 5.0})
    assert x.final.s is False and x.label == "insufficient"


def test_a_mistyped_qualifier_is_checked_by_what_it_says():
    x, _ = _slot_run("Audrey has had her dogs for five years.", kind=("qualifier", "modality"))
    assert x.final.s is True and x.label == "contradicted"


def test_the_adjudicator_settles_a_disputed_slot_check_blinded():
    """A's S yes and B's S no put R in dispute: the adjudicator sees 'different quantity: yes/no'
    and answers S itself over the same passage."""
    from derivaudit.audit.annotate import adjudicate, primitives

    be = RuleBackend("1")
    w = Write("w", "c", "Audrey has had her dogs for five years.", ("d1",), "d2")
    it = Item(Obligation("w#o1", "w", "qualifier", "quantity", w.text), w, "expanded", DOGS)
    pa = primitives([it], Annotator("A", be, "a"))[0]
    pb = primitives([it], Annotator("B", be, "b", {"s": 5.0}))[0]
    assert pa.r and not pb.r
    (adj,) = adjudicate([it], [pa], [pb], Annotator("adjudicator", be, "a"))
    asked = [p for p in be.seen if "Two independent assessments" in p.task and "quantity" in p.task]
    assert asked and all("different quantity: yes" in p.task and "different quantity: no" in p.task for p in asked)
    assert "Audrey" not in asked[0].task.split("Assessment 1")[1].split("They disagree")[0]
    assert adj.s is True and adj.r is True


def test_a_slot_check_switched_off_is_never_asked():
    import math

    x, be = _slot_run("Audrey has had her dogs for five years.", thresholds={"s": math.inf})
    assert x.final.s is None and x.label == "insufficient"
    assert not any("Its quantity" in p.task or "The quantity it states" in p.task for p in be.seen)
