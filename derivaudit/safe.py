"""Making untrusted memory text inert where it is exported: one place for the rules."""

from __future__ import annotations

from typing import Any

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> Any:
    """Prefix text that a spreadsheet would run as a formula with a single quote (OWASP CSV injection)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
