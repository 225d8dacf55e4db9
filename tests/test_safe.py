"""Untrusted text made inert for spreadsheets."""

import pytest

from derivaudit.safe import neutralise


@pytest.mark.parametrize(("value", "safe"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1", "'+1"), ("-2", "'-2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("plain", "plain"), (3, 3), (None, None),
])
def test_formula_cells_are_neutralised(value, safe):
    assert neutralise(value) == safe
