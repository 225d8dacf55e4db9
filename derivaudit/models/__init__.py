"""Model backends behind one interface (`Backend`), a lazy registry by name, model specs and named
roles, and the result cache.

    from derivaudit.models import load_backend
    be = load_backend("transformers", "smollm2")            # the embedded offline model
    be = load_backend("vllm", "Qwen/Qwen3-30B-A3B")          # local GPU, needs derivaudit[vllm]
    be = load_backend("openai", "my-model", base_urls=["http://gpu1:8000/v1"])

`base` the interface and the scoring rule; `backends` the registry, the default model and
`load_backend`; `roles` model specs, roles and the pool; `cache` the result cache; one module per
backend (`hf`, `llamacpp`, `vllm`, `openai`); `embedded` the offline models; `cores` free CPU cores.
"""

from .backends import (
    ANSWER_ROLES,
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    REPLAY_ROLES,
    ROLES,
    SCAN_ROLES,
    backend_choices,
    default_backend,
    default_model,
    load_backend,
)
from .base import DEFAULT_TOP_K, Backend, BackendError, Prompt, Score, score_from_top
from .cache import CachedBackend, ResultCache
from .roles import ModelPool, ModelRoles, ModelSpec, parse_role

__all__ = [
    "ANSWER_ROLES", "BACKENDS", "DEFAULT_BACKEND", "DEFAULT_BASE_URL", "DEFAULT_MODEL", "DEFAULT_TOP_K",
    "REPLAY_ROLES", "ROLES",
    "SCAN_ROLES", "Backend", "BackendError", "CachedBackend", "ModelPool", "ModelRoles", "ModelSpec", "Prompt",
    "ResultCache", "Score", "backend_choices", "default_backend", "default_model", "load_backend", "parse_role",
    "score_from_top",
]
