"""The write audit: each memory write's evidence views, obligations, D/E/R primitives and labels
(the scan, resumable over a run folder), thresholds, rubric stability, gold accuracy, lifecycle.

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "ConversationIndex": "evidence",
    "EvidenceSettings": "evidence",
    "EvidenceViews": "evidence",
    "build_views": "evidence",
    "passage_dict": "evidence",
    "tokenize": "evidence",
    "ScanConfig": "scan",
    "another_log": "scan",
    "Decomposition": "decompose",
    "Annotator": "annotate",
    "Item": "annotate",
    "Primitives": "annotate",
    "label_writes": "scope",
    "scope_report": "scope",
})
__all__ = __dir__()
