"""One lazy registry style for backends, importers, views and report formats: a name maps to
"module:object", and the module is imported only when that name is chosen (so `derivaudit report`
never imports torch, and a missing optional extra only matters to the user who picks it). Modelled
on lm-evaluation-harness `lm_eval/api/registry.py`.

    BACKENDS = Registry("backend", {"transformers": "derivaudit.models.hf:TransformersBackend"},
                        group="derivaudit.backends", check=is_backend_class)
    cls = BACKENDS.get("transformers")         # imports derivaudit.models.hf now
    BACKENDS.register("mine", "mypkg.backend:MyBackend")   # or the object itself

A name is registered once: registering it again is an error (`replace=True` says it is meant).
An unknown name is a KeyError that lists the known names and suggests the closest. A `check`
callable vets each object when it is first loaded, so a plugin of the wrong kind fails with its
name instead of deep inside a scan.

**Plugins.** A registry with a `group` also holds the entry points of that group, declared by any
installed distribution, e.g. in the plugin's pyproject.toml:

    [project.entry-points."derivaudit.backends"]
    rule = "mypkg.backend:RuleBackend"

Entry points are read on first use and imported only when chosen, like built-in entries. One that
reuses a built-in name is skipped with a warning: a plugin never replaces derivaudit's own entry.

An entry may carry traits, known without importing it (what options a backend takes, whether it
runs one prompt at a time in process): `Registry(kind, entries, traits={name: {...}})`,
`register(name, target, **traits)`, `has(name, trait)`, `having(trait)`.
"""

from __future__ import annotations

import difflib
import importlib
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_MISSING = object()
GROUPS = ("derivaudit.importers", "derivaudit.backends", "derivaudit.views", "derivaudit.formats")


class RegistryError(ValueError):
    """A name registered twice, or an entry that is not what its registry holds."""


class Registry(Mapping[str, Any]):
    def __init__(self, kind: str, entries: Mapping[str, Any] | None = None,
                 traits: Mapping[str, Mapping[str, Any]] | None = None, *, group: str | None = None,
                 check: Callable[[Any], str | None] | None = None):
        """`check(obj)` returns why `obj` cannot be this registry's entry, or None."""
        self.kind, self.group, self.check = kind, group, check
        self._entries: dict[str, Any] = dict(entries or {})
        self._traits: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (traits or {}).items()}
        self._origin: dict[str, str] = {}  # name -> the distribution a plugin entry came from
        self._plugins_read = group is None

    # ---------------------------------------------------------------- adding entries

    def register(self, name: str, target: Any, *, replace: bool = False, **traits: Any) -> Any:
        """Add `name` -> `target` ("module:object" or the object itself); returns the target.
        A name already registered is a RegistryError unless `replace`. (Plugins are read at the first
        lookup, after the built-in entries are registered, so they never displace one.)"""
        if name in self._entries and not replace:
            raise RegistryError(f"{self.kind} {name!r} is already registered"
                                + (f" (by the plugin {self._origin[name]})" if name in self._origin else "")
                                + "; pass replace=True to replace it")
        self._entries[name] = target
        self._traits[name] = traits
        return target

    def _read_plugins(self) -> None:
        if self._plugins_read:
            return
        self._plugins_read = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group or ""):
            dist = getattr(ep.dist, "name", None) or "an installed package"
            if ep.name in self._entries:
                warnings.warn(f"{dist}: {self.group} entry point {ep.name!r} reuses a built-in {self.kind} name; "
                              "skipped", stacklevel=2)
                continue
            self._entries[ep.name] = ep.value
            self._traits.setdefault(ep.name, {})
            self._origin[ep.name] = dist

    # ---------------------------------------------------------------- reading

    def has(self, name: str, trait: str) -> bool:
        """Whether entry `name` declares `trait` true (an unknown name has no traits)."""
        self._read_plugins()
        return bool(self._traits.get(name, {}).get(trait))

    def trait(self, name: str, trait: str, default: Any = None) -> Any:
        self._read_plugins()
        return self._traits.get(name, {}).get(trait, default)

    def having(self, trait: str) -> list[str]:
        """The names whose entries declare `trait`, in registry order."""
        return [n for n in self.names() if self.has(n, trait)]

    def unknown(self, name: str) -> str:
        """The message for a name not in the registry: what is known, and the closest names."""
        known = self.names()
        close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown {self.kind} {name!r} (known: {', '.join(known)}){hint}"

    def get(self, name: str, default: Any = _MISSING) -> Any:  # type: ignore[override]
        self._read_plugins()
        if name not in self._entries:
            if default is not _MISSING:
                return default
            raise KeyError(self.unknown(name))
        target = self._entries[name]
        if isinstance(target, str):
            obj = _load(target, f"{self.kind} {name!r}" + (f" (plugin {self._origin[name]})"
                                                            if name in self._origin else ""))
            why = self.check(obj) if self.check else None
            if why:
                raise RegistryError(f"{self.kind} {name!r} -> {target}: {why}")
            self._entries[name] = target = obj
        return target

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        self._read_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def names(self) -> list[str]:
        self._read_plugins()
        return list(self._entries)

    def origin(self, name: str) -> str | None:
        """The distribution that declared `name` as a plugin, or None for a built-in entry."""
        self._read_plugins()
        return self._origin.get(name)


def _load(target: str, what: str) -> Any:
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise RegistryError(f"{what} -> {target}: cannot be loaded ({e})") from e
    return obj


def face(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package face's `__getattr__` and `__dir__` (PEP 562): each public name maps to the
    submodule that defines it, imported on first use, so importing a face (or any module under it)
    never pulls in the rest of the package (the model layer above all).

        __getattr__, __dir__ = face(__name__, {"scan": "scan", "ScanConfig": "scan"})
    """
    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
