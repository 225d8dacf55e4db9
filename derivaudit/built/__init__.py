"""Built tests: matched families of memories (composition), temporal and modality drift over
rewriting rounds, and the downstream cost of a wrong or missing memory.

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "FamilyError": "families",
    "load_families": "families",
    "ProbeError": "probe",
    "load_probes": "probe",
})
__all__ = __dir__()
