"""Rates you can trust: balanced rates and intervals across conversations, prediction-powered
estimates from a few reference labels, per-write confidence, seeded stratified samples.

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "auc": "stats",
    "balanced_interval": "stats",
    "cohen_kappa": "stats",
    "paired_interval": "stats",
    "Estimate": "estimate",
    "Sample": "estimate",
    "estimate": "estimate",
    "ppi_iid": "estimate",
    "corrected": "trust",
    "write_confidence": "trust",
    "accuracy_at_coverage": "trust",
    "SampleError": "sampling",
    "stratified": "sampling",
})
__all__ = __dir__()
