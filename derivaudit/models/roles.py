"""Model specs and named roles: which model each job of a run uses, and a pool that opens each once.

A run gives each job a named role (annotator_a, annotator_b, adjudicator, verifier) and a
`ModelSpec` for it; roles without their own spec use the default one (like inspect_ai's
`--model-role critic=...`). `ModelPool` opens each distinct spec once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .backends import BACKENDS, DEFAULT_BASE_URL, ROLES, _takes, default_backend, default_model, load_backend
from .base import Backend, BackendError


@dataclass(frozen=True)
class ModelSpec:
    """Which model a role uses: backend, model, and the options of the openai backend."""

    backend: str = field(default_factory=lambda: default_backend())
    model: str = field(default_factory=lambda: default_model())
    base_urls: tuple[str, ...] = ()
    top_logprobs: int | None = None
    dtype: str | None = None  # transformers / vllm weights; llama.cpp runs the GGUF's own quantization
    threads: int | None = None  # llamacpp / transformers CPU threads (None: the backend's default)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise BackendError(BACKENDS.unknown(self.backend))
        for given, option, flag in ((self.base_urls, "base_urls", "--base-url"), (self.dtype, "dtype", "--dtype"),
                                    (self.threads is not None, "threads", "--threads")):
            if given and (err := _takes(option, flag, self.backend)):
                raise err
        if self.threads is not None and self.threads < 1:
            raise BackendError(f"--threads must be at least 1, got {self.threads}")

    def options(self) -> dict[str, Any]:
        if BACKENDS.has(self.backend, "base_urls"):
            return {"base_urls": list(self.base_urls or (DEFAULT_BASE_URL,)), "top_logprobs": self.top_logprobs}
        opts: dict[str, Any] = {"dtype": self.dtype} if self.dtype else {}
        if self.threads:
            opts["n_threads"] = self.threads
        return opts

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["base_urls"] = list(self.base_urls)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelSpec:
        return cls(d.get("backend") or default_backend(), d.get("model") or default_model(),
                   tuple(d.get("base_urls") or ()), d.get("top_logprobs"), d.get("dtype"), d.get("threads"))

    def __str__(self) -> str:
        return f"{self.backend}:{self.model}"


def parse_role(text: str, default: ModelSpec, roles: tuple[str, ...] = ROLES) -> tuple[str, ModelSpec]:
    """`ROLE=MODEL` or `ROLE=BACKEND:MODEL` -> (role, spec). A model given without a backend keeps the
    default's backend; the openai options (base URLs, top_logprobs) carry over when the backend is openai."""
    role, sep, value = text.partition("=")
    role, value = role.strip(), value.strip()
    if not sep or not role or not value:
        raise BackendError(f"--model-role {text!r}: expected ROLE=MODEL or ROLE=BACKEND:MODEL "
                           f"(roles: {', '.join(roles)})")
    if role not in roles:
        raise BackendError(f"--model-role {text!r}: unknown role {role!r} (roles: {', '.join(roles)})")
    head, colon, rest = value.partition(":")
    backend, model = (head, rest) if colon and head in BACKENDS else (default.backend, value)
    if not model:
        raise BackendError(f"--model-role {text!r}: no model after the backend")
    keep = default.backend == backend == "openai"
    return role, ModelSpec(backend, model, default.base_urls if keep else (),
                           default.top_logprobs if backend == "openai" else None,
                           default.dtype if backend == default.backend else None,
                           default.threads if BACKENDS.has(backend, "threads") else None)


@dataclass
class ModelRoles:
    """The default spec plus per-role overrides; `spec(role)` says which model a role uses."""

    default: ModelSpec = field(default_factory=ModelSpec)
    roles: dict[str, ModelSpec] = field(default_factory=dict)

    def spec(self, role: str) -> ModelSpec:
        return self.roles.get(role, self.default)

    @classmethod
    def parse(cls, default: ModelSpec, role_args: list[str] | tuple[str, ...] = (),
              roles: tuple[str, ...] = ROLES) -> ModelRoles:
        out = cls(default)
        for text in role_args:
            name, spec = parse_role(text, default, roles)
            out.roles[name] = spec
        return out

    def with_default(self, **changes: Any) -> ModelRoles:
        return ModelRoles(replace(self.default, **changes), dict(self.roles))

    def to_dict(self) -> dict[str, Any]:
        return {"default": self.default.to_dict(), "roles": {k: v.to_dict() for k, v in self.roles.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelRoles:
        return cls(ModelSpec.from_dict(d.get("default") or {}),
                   {k: ModelSpec.from_dict(v) for k, v in (d.get("roles") or {}).items()})


class ModelPool:
    """Opens each distinct spec once (roles that share a model share its weights and its prefix
    cache) and closes them all at the end."""

    def __init__(self, cache: bool | str = True, on_load: Any = None):
        self.cache = cache
        self.on_load = on_load  # a context manager factory shown while a model loads (the CLI's spinner)
        self.loaded: dict[ModelSpec, Backend] = {}

    def get(self, spec: ModelSpec) -> Backend:
        if spec not in self.loaded:
            if self.on_load is not None:
                with self.on_load(spec):
                    self.loaded[spec] = load_backend(spec.backend, spec.model, cache=self.cache, **spec.options())
            else:
                self.loaded[spec] = load_backend(spec.backend, spec.model, cache=self.cache, **spec.options())
        return self.loaded[spec]

    def close(self) -> None:
        for be in self.loaded.values():
            be.close()
        self.loaded.clear()

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
