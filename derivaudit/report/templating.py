"""The template engine of the HTML pages: Jinja2 over `report/templates/`, autoescaped. Every value a
page shows has its control and invisible characters made visible first (`safe.visible`, as
`safe.html_escape` does), then HTML-escaped; markup passes as it is (a macro's output, an SVG plot
made by matplotlib)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from ..safe import visible


def _shown(value: Any) -> Any:
    return value if isinstance(value, Markup) else visible(str(value), newlines=True)


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                              autoescape=True, finalize=_shown, undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True)


def render(name: str, **context: Any) -> str:
    """Template `name` filled with `context`."""
    return environment().get_template(name).render(**context)


def markup(svg: str) -> Markup:
    """A plot's SVG, made here from numbers and escaped labels, to insert as it is."""
    return Markup(svg)
