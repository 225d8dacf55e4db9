"""derivaudit: audit the memory writes of LLM agents as derivations from the history they saw.

Library use (the CLI is a thin layer over these):

    from derivaudit import load_log, build_views
    log = load_log("memories.jsonl")
    for v in build_views(log):
        print(v.write.write_id, len(v.citation_only), len(v.expanded), v.search_limited)
"""

from .evidence import EvidenceSettings, Views, build_views, tokenize
from .gate import admit
from .io import LogError, check_log, load_log
from .records import Conversation, MemoryLog, Problem, Turn, Write

__version__ = "0.1.0"

__all__ = [
    "Conversation", "EvidenceSettings", "admit", "LogError", "MemoryLog", "Problem", "Turn", "Views", "Write",
    "__version__", "build_views", "check_log", "load_log", "tokenize",
]
