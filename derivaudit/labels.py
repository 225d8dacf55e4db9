"""The label rule (DerivAudit, App. B): D/E/R answers to an obligation label, obligation labels to a
memory label. One module with no imports, so that the report and review layers read the same rule
as the annotation without loading it.
"""

from __future__ import annotations

from collections.abc import Sequence

# The version of the rules from primitives to labels: part of the primitives stage's fingerprint, so a
# run finished under other rules is relabelled (its model answers come from the result cache).
RULES = "carry-subsets-1"
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
    """The primitives a primitive row's label is read from: the adjudicator's where it was asked,
    else annotator A's (A and B agreed)."""
    return row.get("adjudicator") or row["A"]


def carry_across_views(rows: Sequence[dict]) -> list[dict]:
    """E and R ask whether *some subset* of a view's passages implies the obligation (true, or
    false), and a yes stands only on a named subset that still implies it when scored alone (App.
    B). Such a subset is evidence in every view that holds all its passages: the citation-only
    view's passages are part of the expanded view, so a checked citation-only subset answers the
    expanded view's question too, and an expanded-view subset made of cited turns answers the
    citation-only one. A view's own "no" beside a checked subset it holds is the judge losing
    the passage among more (or fewer) others, not an answer about the evidence.

    `rows`: the primitive rows of one obligation, one per view, each with `passages` (turn ids)
    and the final primitives' 1-based `e_subset`/`r_subset`. Returns new rows whose `label`
    follows from the carried answers; a row that changed keeps its own label as `label_own` and
    says what it took from where in `carried`."""
    out = []
    for row in rows:
        fin = final_primitives(row)
        answers = {"d": fin.get("d"), "e": fin.get("e"), "r": fin.get("r")}
        carried = {}
        held = set(row.get("passages") or [])
        for which in ("e", "r"):
            if answers[which] is not False:
                continue
            for other in rows:
                if other is row:
                    continue
                ofin = final_primitives(other)
                nums = ofin.get(f"{which}_subset") or []
                if not ofin.get(which) or not nums:
                    continue
                turns = [other["passages"][n - 1] for n in nums if 0 < n <= len(other["passages"])]
                if len(turns) == len(nums) and set(turns) <= held:
                    answers[which] = True
                    carried[which] = {"from": other["view"], "passages": turns}
                    break
        new = dict(row)
        if carried:
            new["label_own"] = row.get("label_own", row["label"])
            new["label"] = obligation_label(answers["d"], answers["e"], answers["r"])
            new["carried"] = carried
        out.append(new)
    return out
