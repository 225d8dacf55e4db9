"""Admission: would a write-time verifier admit each write? Verification views, replay of a run
under them, operating points, `admit()` and the gate over HTTP with its decision log.

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "VIEWS": "views",
    "Memory": "views",
    "View": "views",
    "get_view": "views",
    "parse_views": "views",
    "register": "views",
    "replay": "replay",
    "Client": "gate",
    "GateError": "gate",
    "admit": "gate",
    "Limits": "serve",
    "open_gate": "serve",
    "operating_point": "serve",
    "TARGET_FPR": "operating",
})
__all__ = __dir__()
