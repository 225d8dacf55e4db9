"""derivaudit: audit the memory writes of LLM agents as derivations from the history they saw.

Library use (the CLI is a thin layer over these):

    from derivaudit import load_log, build_views
    log = load_log("memories.jsonl")
    for v in build_views(log):
        print(v.write.write_id, len(v.citation_only), len(v.expanded), v.search_limited)

    from derivaudit import audit_echo, audit_overlap      # the read path, no model needed
    print(audit_echo(load_log("reads.jsonl"), serve="fpa").metrics["echo.density"])

Importing the package is light: model code (torch, transformers) loads only when a model is used.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from . import moved
from .audit.evidence import EvidenceSettings, EvidenceViews, build_views, tokenize
from .log.io import LogError, check_log, load_log
from .log.records import Conversation, MemoryLog, Problem, Read, Turn, Write
from .readpath.echo import audit_echo
from .readpath.fpa import serve_fpa
from .readpath.memtrim import trim
from .readpath.overlap import audit_overlap

moved.install()  # the 0.2 module paths (derivaudit.gate, ...), with a DeprecationWarning

try:
    __version__ = version("derivaudit")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "admit":  # the gate pulls in the model layer: import it on first use
        from .admission.gate import admit

        return admit
    if name == "Views":  # the name before 0.3 (one letter from views.View, a verification view)
        import warnings

        warnings.warn("derivaudit.Views is now derivaudit.EvidenceViews", DeprecationWarning, stacklevel=2)
        return EvidenceViews
    raise AttributeError(f"module 'derivaudit' has no attribute {name!r}")


__all__ = [
    "Conversation", "EvidenceSettings", "EvidenceViews", "admit", "LogError", "MemoryLog", "Problem", "Read", "Turn",
    "Write", "__version__", "audit_echo", "audit_overlap", "build_views", "check_log", "load_log", "serve_fpa",
    "tokenize", "trim",
]
