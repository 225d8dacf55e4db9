"""The label rule (DerivAudit, App. B): D/E/R answers to an obligation label, obligation labels to a
memory label. One module with no imports, so that the report and review layers read the same rule
as the annotation without loading it.
"""

from __future__ import annotations

from collections.abc import Sequence

# The version of the rules from primitives to labels: part of the primitives stage's fingerprint, so a
# run finished under other rules is relabelled (its model answers come from the result cache).
RULES = "value-conflicts-2, carry-r-1"  # value-conflicts-2: a later change is an update
OBLIGATION_LABELS = ("supported", "insufficient", "contradicted", "ambiguous")
MEMORY_PRECEDENCE = ("contradicted", "unsupported", "ambiguous", "supported")


def obligation_label(d: bool | None, e: bool | None, r: bool | None) -> str:
    """App. B: D=no -> ambiguous; E yes, R no -> supported; E no, R yes -> contradicted;
    E no, R no -> insufficient; E yes, R yes -> ambiguous. A primitive that could not be scored
    (None) leaves the obligation ambiguous."""
    if d is None or e is None or r is None or not d:
        return "ambiguous"
    if e and not r:
        return "supported"
    if r and not e:
        return "contradicted"
    if not e and not r:
        return "insufficient"
    return "ambiguous"


def memory_label(labels: Sequence[str]) -> str:
    """A memory is supported only if every obligation is: contradicted > unsupported (any
    insufficient obligation) > ambiguous > supported."""
    present = {"unsupported" if x == "insufficient" else x for x in labels}
    for lab in MEMORY_PRECEDENCE:
        if lab in present:
            return lab
    raise ValueError("a memory needs at least one obligation label")


def final_primitives(row: dict) -> dict:
    """The primitives the annotation settled on: the adjudicator's where it was asked, else
    annotator A's (A and B agreed)."""
    return row.get("adjudicator") or row["A"]


def answers(row: dict) -> dict:
    """The D/E/R answers and subsets a primitive row's label is read from: its `settled` answers
    where a rule after the annotation changed them (carry_across_views, conflicts.apply), else the
    final primitives."""
    return row.get("settled") or final_primitives(row)


def settle(row: dict, why: str, **changes) -> dict:
    """A copy of `row` with some answers changed by a rule (`why` names it, under `settled_by`):
    its label follows; its own label stays as `label_own`."""
    new = dict(row)
    a = {k: answers(row).get(k) for k in ("d", "e", "r", "e_subset", "r_subset")}
    a.update(changes)
    new["settled"] = a
    new["settled_by"] = [*row.get("settled_by", []), why]
    new["label_own"] = row.get("label_own", row["label"])
    new["label"] = obligation_label(a["d"], a["e"], a["r"])
    return new


def carry_across_views(rows: Sequence[dict], which: Sequence[str] = ("r",)) -> list[dict]:
    """R asks whether *some subset* of a view's passages implies the obligation is false, and a yes
    stands only on a named subset (App. B). Such a subset refutes it in every view that holds all
    its passages: the citation-only view's passages are part of the expanded view, so a
    refutation found on cited turns answers the expanded view too (where the judge lost the turn
    among twelve more), and one found in the expanded view on cited turns answers the
    citation-only view. The same holds for E in logic, but not in evidence: in a one- or
    two-passage citation view the subset check repeats the full question, so an E yes there has
    passed one check where the expanded view asks two, and carrying it turned two unsupported
    LoCoMo dev writes supported for one it fixed (docs/method.md); `which=("e", "r")` does it.

    `rows`: the primitive rows of one obligation, one per view, each with `passages` (turn ids).
    Returns new rows; one that took an answer says from where under `carried` (see `settle`)."""
    out = []
    for row in rows:
        new = row
        held = list(row.get("passages") or [])
        for w in which:
            if answers(new).get(w) is not False:
                continue
            for other in rows:
                a = answers(other)
                nums = a.get(f"{w}_subset") or []
                if other is row or not a.get(w) or not nums:
                    continue
                turns = [other["passages"][n - 1] for n in nums if 0 < n <= len(other["passages"])]
                if len(turns) == len(nums) and set(turns) <= set(held):
                    new = settle(new, f"carried {w.upper()} from {other['view']}",
                                 **{w: True, f"{w}_subset": sorted(held.index(t) + 1 for t in turns)})
                    new["carried"] = {**new.get("carried", {}), w: {"from": other["view"], "passages": turns}}
                    break
        out.append(new)
    return out
