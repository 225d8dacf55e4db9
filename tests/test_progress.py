from __future__ import annotations

from derivaudit.progress import in_parts, set_reporter


def test_in_parts_calls_part_by_part_and_reports_after_each():
    seen, calls = [], []
    prev = set_reporter(lambda *a: seen.append(a))
    try:
        out = in_parts("doubling", list(range(5)), lambda xs: calls.append(xs) or [x * 2 for x in xs], size=2)
    finally:
        set_reporter(prev)
    assert out == [0, 2, 4, 6, 8] and calls == [[0, 1], [2, 3], [4]]
    assert seen == [("doubling", 2, 5, "items"), ("doubling", 4, 5, "items"), ("doubling", 5, 5, "items")]
    assert in_parts("nothing", [], lambda xs: xs) == []
