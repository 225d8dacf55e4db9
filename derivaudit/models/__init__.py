"""Model backends behind one interface (`Backend`), a registry by name, and the result cache.

    from derivaudit.models import load_backend
    be = load_backend("transformers", "smollm2")            # the embedded offline model
    be = load_backend("vllm", "Qwen/Qwen3-30B-A3B")          # local GPU, needs derivaudit[vllm]
    be = load_backend("openai", "my-model", base_urls=["http://gpu1:8000/v1"])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import DEFAULT_TOP_K, Backend, BackendError, Prompt, Score, score_from_top
from .cache import CachedBackend, ResultCache


def _transformers(model: str, **kw: Any) -> Backend:
    from .hf import TransformersBackend

    return TransformersBackend(model, **kw)


def _vllm(model: str, **kw: Any) -> Backend:
    from .vllm import VLLMBackend

    return VLLMBackend(model, **kw)


def _openai(model: str, **kw: Any) -> Backend:
    from .openai import OpenAIBackend

    return OpenAIBackend(model, **kw)


BACKENDS: dict[str, Callable[..., Backend]] = {
    "transformers": _transformers,
    "vllm": _vllm,
    "openai": _openai,
}
DEFAULT_BACKEND = "transformers"
DEFAULT_MODEL = "smollm2"


def load_backend(name: str = DEFAULT_BACKEND, model: str = DEFAULT_MODEL, *, cache: bool | str = True,
                 **options: Any) -> Backend:
    """Build a backend by registry name; wrap it in the persistent result cache unless cache=False
    (a string is a cache file path)."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    backend = BACKENDS[name](model, **{k: v for k, v in options.items() if v is not None})
    if cache is False:
        return backend
    return CachedBackend(backend, ResultCache(cache if isinstance(cache, str) else None))


__all__ = [
    "BACKENDS", "DEFAULT_TOP_K", "Backend", "BackendError", "CachedBackend", "Prompt", "ResultCache", "Score",
    "load_backend", "score_from_top",
]
