"""vLLM backend (local GPU, the fast path). Optional: `pip install 'derivaudit[vllm]'`.

Set up for exact log-odds: `max_logprobs=100` (vLLM's default cap is 20 and it raises above it),
`logprobs_mode="raw_logprobs"` (before any logits processing), prefix caching on so every view of
one memory reuses the evidence prefix, greedy `SamplingParams(max_tokens=1, temperature=0,
logprobs=100)`. Chat templates are rendered with thinking disabled (`enable_thinking=False`), since
a thinking model's first token would otherwise be `<think>`. Generations use structured JSON output
when a schema is given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..extras import missing
from .base import (
    DEFAULT_TOP_K,
    YES_NO,
    Backend,
    BackendError,
    Prompt,
    Score,
    VerdictIds,
    score_from_top,
    variant_ids,
)


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, model: str, *, max_logprobs: int = DEFAULT_TOP_K, seed: int = 0, revision: str | None = None,
                 **engine_args: Any):
        super().__init__()
        try:
            from vllm import LLM
        except ImportError as e:
            raise BackendError(missing("the vllm backend", "vllm", e)) from None
        self.llm = LLM(model=model, revision=revision, max_logprobs=max_logprobs, enable_prefix_caching=True,
                       logprobs_mode="raw_logprobs", seed=seed, **engine_args)
        self.tokenizer = self.llm.get_tokenizer()
        template = getattr(self.tokenizer, "chat_template", None) or ""
        self._identity = {
            "backend": self.name, "model": model, "revision": revision,
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest(),
            "logprobs_mode": "raw_logprobs",
        }
        self.template = bool(template)
        self.verdict_ids = VerdictIds(lambda w: variant_ids(self.tokenizer, w))
        self.yes_ids, self.no_ids = self.verdict_ids(YES_NO)

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def render(self, prompt: Prompt) -> str:
        if not self.template:
            return prompt.text + prompt.answer_prefix
        return self.tokenizer.apply_chat_template(prompt.messages(), add_generation_prompt=True, tokenize=False,
                                                  enable_thinking=False) + prompt.answer_prefix

    def score(self, prompts: Sequence[Prompt], k: int = DEFAULT_TOP_K) -> list[Score]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, temperature=0, logprobs=k)
        outs = self.llm.generate([self.render(p) for p in prompts], params, use_tqdm=False)
        scores = []
        for o, p in zip(outs, prompts, strict=True):
            self.usage.prompts += 1
            self.usage.prompt_tokens += len(o.prompt_token_ids)
            self.usage.computed_tokens += len(o.prompt_token_ids) - (o.num_cached_tokens or 0)
            first = o.outputs[0].logprobs[0]  # {token_id: Logprob}
            top = sorted(((tid, lp.logprob) for tid, lp in first.items()), key=lambda x: -x[1])
            scores.append(score_from_top(top, *self.verdict_ids(p.verdict), k,
                                         label=lambda t: self.tokenizer.decode([t])))
        self.usage.calls += 1
        return scores

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 256,
                 json_schema: dict[str, Any] | None = None, stop: Sequence[str] = ()) -> list[str]:
        from vllm import SamplingParams

        extra: dict[str, Any] = {}
        if json_schema is not None:
            from vllm.sampling_params import StructuredOutputsParams

            extra["structured_outputs"] = StructuredOutputsParams(json=json_schema)
        params = SamplingParams(max_tokens=max_new_tokens, temperature=0, stop=list(stop) or None, **extra)
        outs = self.llm.generate([self.render(p) for p in prompts], params, use_tqdm=False)
        self.usage.calls += 1
        self.usage.prompts += len(outs)
        texts = []
        for o in outs:
            self.usage.prompt_tokens += len(o.prompt_token_ids)
            self.usage.generated_tokens += len(o.outputs[0].token_ids)
            texts.append(o.outputs[0].text.strip())
        return texts

    def close(self) -> None:
        del self.llm
