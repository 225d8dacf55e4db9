"""The HTML template engine: every value escaped, controls made visible, plots inserted as made."""

from __future__ import annotations

import pytest
from jinja2 import UndefinedError

from derivaudit.report import templating


def test_values_are_escaped_and_their_controls_shown_and_markup_passes():
    env = templating.environment()
    page = env.from_string('{% from "_macros.html.j2" import table, figure %}{{ table(["h<1>"], rows, "c") }}'
                           '{{ figure(cap, svg) }}').render(
        rows=[["<script>alert(1)</script>", "a\x1bb"], [None, 3]], cap="<b>cap", svg=templating.markup("<svg></svg>"))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a\\u001bb" in page and "\x1b" not in page
    assert "<th>h&lt;1&gt;</th>" in page and "<td>None</td><td>3</td>" in page
    assert "<figcaption>&lt;b&gt;cap</figcaption><svg></svg>" in page


def test_a_missing_value_is_an_error_not_an_empty_cell():
    with pytest.raises(UndefinedError):
        templating.environment().from_string("{{ nothing }}").render()
