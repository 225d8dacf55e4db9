"""The module paths of 0.2, before the package was grouped into subpackages: `import
derivaudit.gate` (and every other old path) still works, with a DeprecationWarning naming the new
path, so code written against 0.2 runs unchanged until 0.4 removes the old paths."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

_GROUPS = {
    "log": ("records", "io", "lines", "recordcheck", "history", "outputs", "spill", "validation", "timeref"),
    "audit": ("evidence", "decompose", "annotate", "labels", "conflicts", "slots", "calibrate", "rubric", "gold",
              "scope", "scan", "incremental", "lifecycle", "lifecycle_calibration"),
    "admission": ("views", "operating", "replay", "gate", "serve"),
    "rates": ("stats", "estimate", "trust", "sampling"),
    "readpath": ("echo", "overlap"),
    "built": ("families", "drift", "probe"),
}
MOVED = {f"derivaudit.{m}": f"derivaudit.{group}.{m}" for group, mods in _GROUPS.items() for m in mods} | {
    "derivaudit.workspace": "derivaudit.runs.workspace",
    "derivaudit.reference": "derivaudit.review.reference",
    "derivaudit.export": "derivaudit.review.export",
    "derivaudit.report.gates": "derivaudit.report.ci_gates",
}


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old path with the module at its new one (the same module object)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} is now {new}; the old path goes in derivaudit 0.4", DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported at its new path."""


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
