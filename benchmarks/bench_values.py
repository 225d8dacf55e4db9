"""Where the update rule of the value check can move a label: every gold write's memory text taken
as one obligation and each passage of its views alone as the event (what a judge's one-passage E
subset gives), checked with and without the rule that a later change is an update
(conflicts.updated). No model is called.

Usage:
    python benchmarks/bench_values.py LOG [LOG ...]     # logs whose writes carry meta.gold

Prints, per log, the writes with a one-passage conflict by gold category, the writes where the
update rule spares one of those passages, and each spared passage. For a log with deletions,
invalidations or updates: the operations whose target's date or count a later turn moves
(conflicts.later_value over the after view, the target's text as its one obligation: U by
arithmetic) and the updates whose new version gives the target another value (not kept), with gold.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from derivaudit import EvidenceSettings, build_views, load_log  # noqa: E402
from derivaudit.audit import conflicts, lifecycle  # noqa: E402
from derivaudit.audit.scan import write_time  # noqa: E402


def measure(path: str) -> None:
    log = load_log([path])
    fired: Counter[str] = Counter()
    spared: Counter[str] = Counter()
    shown = []
    for v in build_views(log, EvidenceSettings()):
        w, when = v.write, write_time(log, v.write)
        gold = (w.meta or {}).get("gold") or "no gold"
        view = list({t.turn_id: conflicts.Passage(t.turn_id, t.text, t.time)
                     for t in (*v.citation_only, *v.expanded)}.values())
        with mock.patch.object(conflicts, "updated", lambda *a, **k: False):
            before = [p for p in view if conflicts.conflict(w.text, when, [p])]
        after = [p for p in before if conflicts.conflict(w.text, when, [p], view)]
        fired[gold] += bool(before)
        if len(after) < len(before):
            spared[gold] += 1
            shown += [(w.write_id, gold, w.text, p.turn_id, p.text) for p in before if p not in after]
    print(f"{path}: writes with a one-passage conflict {dict(fired)}; with one spared as an update {dict(spared)}")
    for row in shown:
        print("   {}  [{}] {!r}\n      spared {}: {!r}".format(*row[:3], row[3], row[4][:160]))


def measure_lifecycle(path: str) -> None:
    log = load_log([path])
    cases = lifecycle.cases(log)
    if not cases:
        return
    moved: Counter[str] = Counter()
    for c in cases:
        by = c.new or c.successor
        by_p = conflicts.Passage(by.write_id, by.text, write_time(log, by)) if by else None
        when = write_time(log, c.target)
        later = [conflicts.Passage(t.turn_id, t.text, t.time) for t in lifecycle.after_turns(log, c)]
        found = conflicts.later_value(c.target.text, when, later, by_p)
        changed = c.new is not None and conflicts.conflict(c.target.text, when, [by_p])
        if found or changed:
            moved[c.gold or "no gold"] += 1
            print(f"   {c.case_id} ({c.kind}, gold {c.gold}) {c.target.text!r} -> {by.text if by else None!r}: "
                  f"{found.note() if found else 'no later value'}; {'not kept' if changed else ''}")
    print(f"{path}: {len(cases)} operations; the value rule reaches {dict(moved)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        measure(p)
        measure_lifecycle(p)
