"""The backends by name (a lazy registry with traits), the default model, and `load_backend`.

    from derivaudit.models import load_backend
    be = load_backend("transformers", "smollm2")            # the embedded offline model
    be = load_backend("vllm", "Qwen/Qwen3-30B-A3B")          # local GPU, needs derivaudit[vllm]
    be = load_backend("openai", "my-model", base_urls=["http://gpu1:8000/v1"])
"""

from __future__ import annotations

import os
from typing import Any

from ..registry import Registry, RegistryError
from .base import Backend, BackendError
from .cache import CachedBackend, ResultCache

# Traits: the options a backend takes (threads: CPU threads; dtype: weight type; base_urls: a server
# fleet) and `serial`: it runs in this process one prompt at a time, so a scan sends it one write
# per round trip (nothing to batch; every write reaches the partial file as soon as it is judged).
BACKENDS = Registry("backend", {
    "transformers": "derivaudit.models.hf:TransformersBackend",
    "vllm": "derivaudit.models.vllm:VLLMBackend",
    "openai": "derivaudit.models.openai:OpenAIBackend",
    "llamacpp": "derivaudit.models.llamacpp:LlamaCppBackend",
}, traits={
    "transformers": {"threads": True, "dtype": True, "serial": True, "about": "CPU/GPU"},
    "vllm": {"dtype": True, "about": "local GPU"},
    "openai": {"base_urls": True, "about": "OpenAI-compatible servers"},
    "llamacpp": {"threads": True, "serial": True, "about": "CPU, GGUF"},
}, group="derivaudit.backends", check=lambda obj: None if isinstance(obj, type) and issubclass(obj, Backend)
   else "not a subclass of derivaudit.models.base.Backend")


def backend_choices() -> str:
    """The backends as the --backend help names them (from the registry: a new one appears there)."""
    return ", ".join(f"{n} ({BACKENDS.trait(n, 'about')})" if BACKENDS.trait(n, "about") else n for n in BACKENDS)


def _takes(option: str, flag: str, backend: str) -> BackendError | None:
    if BACKENDS.has(backend, option):
        return None
    names = BACKENDS.having(option)
    listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return BackendError(f"{flag} is for the {listed} backend{'s' if len(names) > 1 else ''}, not {backend}")
# The default model, named once: every command and library call without --model uses it
# (the environment variables DERIVAUDIT_BACKEND / DERIVAUDIT_MODEL override it, e.g. in CI).
DEFAULT_BACKEND = "llamacpp"
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"

SCAN_ROLES = ("annotator_a", "annotator_b", "adjudicator")
REPLAY_ROLES = ("verifier",)
ANSWER_ROLES = ("generator", "answer_judge")  # the read path's answer replay
ROLES = (*SCAN_ROLES, *REPLAY_ROLES, *ANSWER_ROLES)


def default_backend() -> str:
    return os.environ.get("DERIVAUDIT_BACKEND") or DEFAULT_BACKEND


def default_model() -> str:
    return os.environ.get("DERIVAUDIT_MODEL") or DEFAULT_MODEL


def load_backend(name: str | None = None, model: str | None = None, *, cache: bool | str = True,
                 **options: Any) -> Backend:
    """Build a backend by registry name (default: the default model); wrap it in the persistent result
    cache unless cache=False (a string is a cache file path)."""
    name, model = name or default_backend(), model or default_model()
    if name not in BACKENDS:
        raise BackendError(BACKENDS.unknown(name))
    try:
        cls = BACKENDS.get(name)
    except RegistryError as e:
        raise BackendError(str(e)) from None
    backend = cls(model, **{k: v for k, v in options.items() if v is not None})
    if cache is False:
        return backend
    return CachedBackend(backend, ResultCache(cache if isinstance(cache, str) else None))
