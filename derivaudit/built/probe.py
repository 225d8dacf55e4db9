"""The downstream probe (DerivAudit App. H): what does an admission error cost the reader? One memory
slot is filled correct, distorted (a wrong memory admitted) or empty (a valid memory rejected),
everything else fixed, and a reader answers two multiple-choice queries: one whose answer the
distortion changes, one that only the memory answers.

Answers are read from the options' letter log-probabilities, averaged over all orders of the
options and `runs` repetitions at temperature 0 (identical for a deterministic backend; kept for
servers whose batching moves log-probs). No result is read unless the reader passes four controls
at 0.80: the correct slot answers both queries, a distorted slot moves the first answer to the
distortion's, and with the correct slot the chosen option is the same across option orders. An
answer tied over the orders counts as no answer (a failure).

Probe file (JSONL, one item per line): probe_id, context (the other memories, fixed), slot
{correct, distorted}, queries: [{kind: "changed", question, options (2-4), correct (index),
distorted (index)}, {kind: "only", question, options, correct}].
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import templates
from ..log.io import LogError
from ..log.lines import identified_objects
from ..log.records import Problem
from ..models.base import Backend, Prompt, option_probs

CONDITIONS = ("correct", "distorted", "empty")
PROBE_KINDS = ("changed", "only")
CONTROL_MIN = 0.80
LETTERS = "ABCD"


class ProbeError(LogError):
    """A probe file that cannot be used (exit code 2), with every problem found."""


def load_probes(path: str | Path) -> list[dict[str, Any]]:
    """Parse and validate a probe file; raises ProbeError naming file, line and field."""
    f, problems, out = str(path), [], []
    try:
        parsed = identified_objects(path, "probe_id", problems)
    except LogError as e:
        raise ProbeError(e.problems) from None
    for n, d in parsed:
        before = len(problems)
        ctx = d.get("context", [])
        if not isinstance(ctx, list) or not all(isinstance(x, str) and x.strip() for x in ctx):
            problems.append(Problem(f, n, "context", "bad_value", "a list of memory texts"))
        slot = d.get("slot")
        if not isinstance(slot, dict) or not all(isinstance(slot.get(k), str) and slot[k].strip()
                                                 for k in ("correct", "distorted")):
            problems.append(Problem(f, n, "slot", "missing_field", "needs {correct, distorted} memory texts"))
        qs = d.get("queries")
        kinds = [q.get("kind") for q in qs if isinstance(q, dict)] if isinstance(qs, list) else []
        if sorted(kinds) != sorted(PROBE_KINDS) or len(qs) != 2:
            problems.append(Problem(f, n, "queries", "bad_value", 'needs two queries, kinds "changed" and "only"'))
        else:
            for i, q in enumerate(qs):
                where = f"queries[{i}]"
                opts = q.get("options")
                if not isinstance(q.get("question"), str) or not q["question"].strip():
                    problems.append(Problem(f, n, f"{where}.question", "missing_field", "needs the question"))
                if not isinstance(opts, list) or not 2 <= len(opts) <= len(LETTERS) or not all(
                        isinstance(o, str) and o.strip() for o in opts):
                    problems.append(Problem(f, n, f"{where}.options", "bad_value", "2 to 4 non-empty options"))
                    continue
                for k in ("correct", "distorted") if q["kind"] == "changed" else ("correct",):
                    v = q.get(k)
                    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < len(opts):
                        problems.append(Problem(f, n, f"{where}.{k}", "bad_value",
                                                f"an option index from 0 to {len(opts) - 1}"))
                if q["kind"] == "changed" and q.get("correct") == q.get("distorted"):
                    problems.append(Problem(f, n, f"{where}.distorted", "bad_value",
                                            "the distortion must change the answer"))
        if len(problems) == before:
            out.append(d)
    if not out and not problems:
        problems.append(Problem(f, None, None, "empty", "no probe item in the file"))
    if problems:
        raise ProbeError(problems)
    return out


def _prompts(item: dict[str, Any], condition: str, query: dict[str, Any], order: Sequence[int]) -> list[Prompt]:
    mems = list(item.get("context", []))
    if condition != "empty":
        # the slot sits at a fixed, seeded place among the other memories
        at = random.Random(item["probe_id"]).randint(0, len(mems))
        mems.insert(at, item["slot"][condition])
    block = templates.render("probe_memories", memories="\n".join(f"- {m}" for m in mems) or "- (none)")
    letters = LETTERS[: len(order)]
    task = templates.render("probe_question", question=query["question"],
                            options="\n".join(f"{letters[i]}. {query['options'][o]}" for i, o in enumerate(order)),
                            letters=", ".join(letters[:-1]) + f" or {letters[-1]}")
    return [Prompt(block, task, verdict=((letters[i],), tuple(x for x in letters if x != letters[i])))
            for i in range(len(order))]


def run(path: str | Path, backend: Backend, *, runs: int = 3, reps: int = 1000, seed: int = 0,
        progress: Callable[[str, int, int], None] = lambda *_: None) -> dict[str, Any]:
    """Answer every query under every slot condition over all option orders and `runs` runs."""
    items = load_probes(path)
    rows = []
    for item in items:
        for query in item["queries"]:
            k = len(query["options"])
            orders = list(itertools.permutations(range(k)))
            for condition in CONDITIONS:
                prompts, owner = [], []
                for order in orders:
                    for _ in range(runs):
                        ps = _prompts(item, condition, query, order)
                        prompts += ps
                        owner.append(order)
                scores = backend.score(prompts)
                avg = [0.0] * k
                picks, used = [], 0
                for j, order in enumerate(owner):
                    probs = option_probs([s.logodds for s in scores[j * k : (j + 1) * k]])
                    if probs is None:
                        continue
                    used += 1
                    back = [0.0] * k
                    for pos, opt in enumerate(order):
                        back[opt] = probs[pos]
                    avg = [a + b for a, b in zip(avg, back, strict=True)]
                    picks.append(max(range(k), key=lambda o, back=back: back[o]))
                if not used:
                    rows.append({"probe_id": item["probe_id"], "kind": query["kind"], "condition": condition,
                                 "choice": None, "probs": None, "stable": None, "failed": None})
                    continue
                avg = [a / used for a in avg]
                choice = max(range(k), key=lambda o: avg[o])
                if sum(abs(avg[o] - avg[choice]) < 1e-9 for o in range(k)) > 1:
                    choice = None  # a tie over the orders is no answer (and a failure)
                rows.append({"probe_id": item["probe_id"], "kind": query["kind"], "condition": condition,
                             "choice": choice, "probs": avg,
                             "stable": picks.count(choice) / len(picks) if choice is not None else 0.0,
                             "failed": choice != query["correct"],
                             "distortion_followed": choice == query.get("distorted") if "distorted" in query
                             else None})
        progress("probe", 1, len(items))
    return {"items": len(items), "runs": runs, "rows": rows, **summarise(rows, reps, seed),
            "model": backend.identity()}


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _ci(vals_by_item: dict[str, float], reps: int, seed: int) -> list[float | None]:
    import numpy as np

    if len(vals_by_item) < 2:
        return [None, None]
    v = np.array(list(vals_by_item.values()), dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(v), size=(reps, len(v)))
    means = np.sort(v[draws].mean(axis=1))
    return [float(means[int(0.025 * (reps - 1))]), float(means[int(0.975 * (reps - 1))])]


def summarise(rows: Sequence[dict[str, Any]], reps: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The four controls, failure rates per condition and query kind, and the two costs (distorted
    minus correct on the changed query, empty minus correct on the only-the-memory query), each
    with a bootstrap interval over probe items."""
    def pick(kind: str, cond: str, key: str = "failed") -> dict[str, float]:
        return {r["probe_id"]: float(r[key]) for r in rows if r["kind"] == kind and r["condition"] == cond
                and r[key] is not None}

    stable = [r["stable"] for r in rows if r["stable"] is not None and r["condition"] == "correct"]
    controls = {
        "correct slot answers the changed query": 1 - (_mean(list(pick("changed", "correct").values())) or 0),
        "correct slot answers the only-the-memory query": 1 - (_mean(list(pick("only", "correct").values())) or 0),
        "a distorted slot moves the changed answer": _mean(list(pick("changed", "distorted",
                                                                     "distortion_followed").values())) or 0.0,
        "correct-slot answer stable across option orders": _mean(stable) or 0.0,
    }
    failing = [k for k, v in controls.items() if v < CONTROL_MIN]
    rates = {f"{kind}/{cond}": {"failure": _mean(list(pick(kind, cond).values())),
                                "ci": _ci(pick(kind, cond), reps, seed), "n": len(pick(kind, cond))}
             for kind in PROBE_KINDS for cond in CONDITIONS}
    costs = {}
    for name, kind, cond in (("admitting a distorted memory", "changed", "distorted"),
                             ("rejecting a valid memory (empty slot)", "only", "empty")):
        a, b = pick(kind, cond), pick(kind, "correct")
        diff = {p: a[p] - b[p] for p in a.keys() & b.keys()}
        costs[name] = {"query": kind, "difference": _mean(list(diff.values())), "ci": _ci(diff, reps, seed),
                       "n": len(diff)}
    return {"controls": {k: round(v, 4) for k, v in controls.items()}, "control_min": CONTROL_MIN,
            "read": not failing, "failed_controls": failing, "failure_rates": rates, "costs": costs}
