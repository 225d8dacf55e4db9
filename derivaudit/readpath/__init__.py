"""The read path: memory echo over read events (families, ED, RRI, WEP, FPA) and overreliance by
query-memory overlap (MemTrim).

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "audit_echo": "echo",
    "serve_fpa": "fpa",
    "audit_overlap": "overlap",
    "trim": "memtrim",
    "replay_answers": "answers",
})
__all__ = __dir__()
