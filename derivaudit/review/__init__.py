"""Review and export: the obligation-level and write-level review sheets and their import,
model-human agreement, labels as CSV.

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "ReviewError": "obligations",
    "import_review": "obligations",
    "read_review": "obligations",
    "review_metrics": "obligations",
    "write_sheet": "obligations",
    "human_write_labels": "obligations",
    "import_reviews": "reference",
    "is_write_sheet": "reference",
    "export_csv": "export",
})
__all__ = __dir__()
