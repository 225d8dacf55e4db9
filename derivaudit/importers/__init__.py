"""Adapters from public datasets and memory systems to the derivaudit memory-log schema.

Each importer is one module with a `convert(path) -> ImportResult` function, registered by name
in IMPORTERS ("module:function", imported only when chosen). A source problem (a malformed id, a
write that cannot be placed in history) is returned as a `Problem`, never guessed around. A module
whose source holds conversations but no memories says so with `HOLDS_WRITES = False` (an import
without writes is then not an error), and may tag each row with its place in the input (`ORIGIN`).
"""

from .common import ORIGIN, ImportResult, content_text, instant, open_sqlite, read_json, text_or_none
from .pipeline import IMPORTERS, Importer, importers, run_import

__all__ = [
    "IMPORTERS", "ORIGIN", "ImportResult", "Importer", "content_text", "importers", "instant", "open_sqlite",
    "read_json", "run_import", "text_or_none",
]
