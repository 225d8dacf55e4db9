"""One lazy registry style for backends, importers and views: a name maps to "module:object", and
the module is imported only when that name is chosen (so `derivaudit report` never imports torch,
and a missing optional extra only matters to the user who picks it). Modelled on
lm-evaluation-harness `lm_eval/models/__init__.py`.

    BACKENDS = Registry("backend", {"transformers": "derivaudit.models.hf:TransformersBackend"})
    cls = BACKENDS.get("transformers")         # imports derivaudit.models.hf now
    BACKENDS.register("mine", "mypkg.backend:MyBackend")   # or an object

An entry may carry traits, known without importing it (what options a backend takes, whether it
runs one prompt at a time in process): `Registry(kind, entries, traits={name: {...}})`,
`register(name, target, **traits)`, `has(name, trait)`, `having(trait)`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any


class Registry(Mapping[str, Any]):
    def __init__(self, kind: str, entries: Mapping[str, Any] | None = None,
                 traits: Mapping[str, Mapping[str, Any]] | None = None):
        self.kind = kind
        self._entries: dict[str, Any] = dict(entries or {})
        self._traits: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (traits or {}).items()}

    def register(self, name: str, target: Any, **traits: Any) -> Any:
        """Add `name` -> `target` ("module:object" or the object itself); returns the target."""
        self._entries[name] = target
        self._traits[name] = traits
        return target

    def has(self, name: str, trait: str) -> bool:
        """Whether entry `name` declares `trait` true (an unknown name has no traits)."""
        return bool(self._traits.get(name, {}).get(trait))

    def trait(self, name: str, trait: str, default: Any = None) -> Any:
        return self._traits.get(name, {}).get(trait, default)

    def having(self, trait: str) -> list[str]:
        """The names whose entries declare `trait`, in registry order."""
        return [n for n in self._entries if self.has(n, trait)]

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        if name not in self._entries:
            if default is not None:
                return default
            raise KeyError(f"unknown {self.kind} {name!r} (known: {', '.join(self._entries)})")
        target = self._entries[name]
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
            self._entries[name] = target = obj
        return target

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return list(self._entries)
