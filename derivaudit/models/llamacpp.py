"""llama.cpp backend (CPU; quantized GGUF weights through llama-cpp-python, `pip install
'derivaudit[llamacpp]'`). The practical engine for a 1.5B verifier on a laptop: ~1 GB of Q4_K_M
weights instead of several GB of de-quantized torch tensors, and fast decoding.

Scoring follows the same rule as every backend (base.py): the log-softmax of the first generated
token's logits, the top k, yes/no variants summed, scoring errors and bounded scores flagged.
Every prompt is evaluated in the same two pieces whatever it is batched with: its system message
and shared block (the evidence, or the decomposition instructions), kept as a saved KV state (an
LRU) and evaluated once per block, then the rest of the prompt in one call. llama.cpp's sums for a
token depend on the piece it is evaluated in; when the pieces followed the batch (the longest
prefix shared with a neighbour), 11 of 20 greedy decompositions changed with what they were
decomposed beside (benchmarks/bench_determinism.py). Now a prompt's logits are the same alone, in
any batch and in any order. (Running several suffixes side by side in one batch was measured 12%
faster but made a score depend on its batch by up to 0.2 log-odds.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import OrderedDict
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
    cut_at_stop,
    score_from_top,
    word_variants,
)
from .cores import FreeCores

# A shared block shorter than this is evaluated with the rest of its prompt, not saved apart
# (restoring copies the state: cheap next to evaluating tens of tokens, not next to a few).
MIN_SPLIT = 16


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def render_chat(template: str, messages: list[dict[str, str]], bos: str = "", eos: str = "") -> str:
    """The chat template rendered as transformers renders it (sandboxed Jinja2, trim/lstrip blocks,
    generation prompt on, thinking off), so both backends see the same text."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg: str) -> None:
        raise BackendError(f"chat template error: {msg}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, enable_thinking=False,
                                            bos_token=bos, eos_token=eos)


class LlamaCppBackend(Backend):
    name = "llamacpp"
    commit_every = 32  # a prompt's answer is the same alone and in any batch (`_run`): parts cost nothing

    def __init__(self, model: str, *, n_ctx: int = 4096, n_threads: int | None = None, n_batch: int = 512,
                 seed: int = 0, state_cache_size: int = 8):
        super().__init__()
        # llama.cpp's OpenMP threads wait at every barrier of a forward pass; by default they spin
        # there, taking the core from a thread that shares it with other work. Sleeping waits keep
        # a scan at 0.61x of its quiet speed beside one busy core, against 0.49x spinning, and cost
        # nothing quiet (benchmarks/bench_load.py --wait-policies default,passive). Read when the
        # library loads, so it is set before the import; a user's own OMP_WAIT_POLICY wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import llama_cpp
        except ImportError as e:
            raise BackendError(missing("the llamacpp backend", "llamacpp", e)) from e
        from .embedded import file_sha256, resolve_gguf

        path, label = resolve_gguf(model)
        self.path = path
        self.n_ctx, self.n_batch, self.seed = n_ctx, n_batch, seed
        fixed = n_threads or int(os.environ.get("DERIVAUDIT_THREADS", 0))
        self.n_threads = fixed or (os.cpu_count() or 1)
        self.cores = None if fixed else FreeCores(self.n_threads)  # default: one thread per free core
        self._threads_now = self.n_threads
        self._llama_cpp = llama_cpp
        self._llm: Any = None
        self._states: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._heads: dict[tuple[str | None, str], list[int]] = {}  # (system, shared) -> its tokens
        self._built: tuple[int, ...] | None = None  # the prefix the context was built from, as one piece
        self.state_cache_size = state_cache_size
        # The vocabulary only (no weights) for the identity, tokenizer and yes/no ids: fully cached
        # reruns never load the weights.
        self._vocab = self._open(vocab_only=True)
        meta = self._vocab.metadata
        self.template = meta.get("tokenizer.chat_template")
        self._bos = self._token_text(self._vocab.token_bos())
        self._eos = self._token_text(self._vocab.token_eos())
        self._identity = {"backend": self.name, "model": label, "file_sha256": file_sha256(path),
                          "chat_template_sha256": _sha(self.template or ""), "dtype": meta.get("general.file_type"),
                          "n_ctx": n_ctx}
        self.verdict_ids = VerdictIds(self._variant_ids)
        try:
            self.yes_ids, self.no_ids = self.verdict_ids(YES_NO)
        except BackendError as e:
            raise BackendError(f"{model!r}: {e}") from None

    def _open(self, vocab_only: bool = False) -> Any:
        try:
            with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
                return self._llama_cpp.Llama(str(self.path), n_ctx=self.n_ctx, n_batch=self.n_batch,
                                             n_ubatch=self.n_batch, n_threads=self.n_threads,
                                             n_threads_batch=self.n_threads, seed=self.seed, vocab_only=vocab_only,
                                             logits_all=False, verbose=False)
        except (ValueError, RuntimeError) as e:
            raise BackendError(f"cannot load {self.path} with llama.cpp: {e}") from e

    @property
    def llm(self) -> Any:
        if self._llm is None:
            self._llm = self._open()
        return self._llm

    def _token_text(self, tid: int) -> str:
        if tid is None or tid < 0:
            return ""
        return self._vocab.detokenize([tid], special=True).decode("utf-8", "replace")

    def _variant_ids(self, word: str) -> set[int]:
        out = set()
        for form in word_variants(word):
            ids = self._vocab.tokenize(form.encode(), add_bos=False, special=False)
            if len(ids) == 1 and self._vocab.detokenize(ids).decode("utf-8", "replace").strip().lower() == word.lower():
                out.add(ids[0])
        return out

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def identity_aliases(self) -> list[dict[str, Any]]:
        return [{**self._identity, "file": str(self.path)}]  # up to 0.2.0 the path was part of it

    # ------------------------------------------------------------ rendering

    def render(self, prompt: Prompt) -> str:
        if not self.template:
            return prompt.text + prompt.answer_prefix
        return render_chat(self.template, prompt.messages(), self._bos, self._eos) + prompt.answer_prefix

    def encode(self, prompt: Prompt) -> list[int]:
        return self._vocab.tokenize(self.render(prompt).encode("utf-8"), add_bos=not self.template, special=True)

    # ------------------------------------------------------------ evaluation with prefix states

    def _split(self, prompt: Prompt, seq: list[int]) -> int:
        """Where a prompt's evaluation is split: after the tokens of its system message and shared
        block (what every prompt of one memory, or every write's decomposition, has in common).
        A function of the prompt alone, never of its neighbours: llama.cpp's sums for a token
        depend on the piece it was evaluated in, and a split that followed the batch made a greedy
        decomposition change with what it was decomposed beside (bench_determinism.py: 11 of 20)."""
        if not prompt.shared:
            return 0
        key = (prompt.system, prompt.shared)
        head = self._heads.get(key)
        if head is None:
            head = self._heads[key] = self.encode(Prompt(prompt.shared, "", system=prompt.system))
            if len(self._heads) > 4 * self.state_cache_size:
                self._heads.pop(next(iter(self._heads)))
        n = min(_shared(seq, head), len(seq) - 1)  # the boundary token may merge with the task's first
        return n if n >= MIN_SPLIT else 0

    def _at(self, prefix: list[int]) -> None:
        """Make the context hold exactly `prefix`, its KV cells computed as one piece from an empty
        context: kept when the context was built from this very prefix, else restored from a saved
        state of this very prefix, else evaluated (and saved). A state of a longer or shorter prefix
        is never cut back or extended: its cells were computed in other pieces."""
        llm = self.llm
        key = tuple(prefix)
        if (self._built == key and llm.n_tokens >= len(key)
                and llm.input_ids[: len(key)].tolist() == prefix):
            llm.n_tokens = len(key)
            return
        if key and key in self._states:
            self._restore(key)
        else:
            llm.n_tokens = 0
            if key:
                self._eval(prefix)
                self._save(key)
        self._built = key

    def _run(self, prompt: Prompt, seq: list[int]) -> None:
        """Evaluate one prompt as [shared prefix][the rest], each piece in one call: the same pieces
        alone, in any batch, in any order, so the same logits."""
        n = self._split(prompt, seq)
        self._at(seq[:n])
        self._eval(seq[n:])

    def _save(self, key: tuple[int, ...]) -> None:
        """The KV cells of the sequence only (llama-cpp-python's save_state also copies n_ctx x vocab
        logits: seconds per call for a 150k vocabulary)."""
        import ctypes

        lib, ctx = self._llama_cpp.llama_cpp, self.llm.ctx
        size = lib.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = lib.llama_state_seq_get_data(ctx, buf, size, 0)
        self._states[key] = ctypes.string_at(buf, n)  # (bytes(buf[:n]) went through a list of ints)
        while len(self._states) > self.state_cache_size:
            self._states.popitem(last=False)

    def _restore(self, key: tuple[int, ...]) -> None:
        import ctypes

        lib, llm = self._llama_cpp.llama_cpp, self.llm
        data = self._states[key]
        self._states.move_to_end(key)
        lib.llama_memory_seq_rm(lib.llama_get_memory(llm.ctx), 0, -1, -1)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if lib.llama_state_seq_set_data(llm.ctx, buf, len(data), 0) != len(data):
            raise BackendError("llama.cpp could not restore a saved prefix state")
        llm.input_ids[: len(key)] = key
        llm.n_tokens = len(key)

    def _eval(self, tokens: list[int]) -> None:
        if self.llm.n_tokens + len(tokens) > self.n_ctx:
            raise BackendError(f"prompt of {self.llm.n_tokens + len(tokens)} tokens exceeds the context of "
                               f"{self.n_ctx} (pass a larger n_ctx)")
        if self.cores is not None and (n := self.cores.threads()) != self._threads_now:
            self._llama_cpp.llama_cpp.llama_set_n_threads(self.llm.ctx, n, n)
            self._threads_now = n
        self.llm.eval(tokens)
        self.usage.computed_tokens += len(tokens)
        self.usage.calls += 1

    def _last_logprobs(self) -> Any:
        import numpy as np

        n_vocab = self.llm.n_vocab()
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits_ith(-1), shape=(n_vocab,)).astype(np.float64)
        m = logits.max()
        return logits - (m + np.log(np.exp(logits - m).sum()))

    def _order(self, prompts: Sequence[Prompt]) -> tuple[list[list[int]], list[int]]:
        """Token ids of every prompt, and an order that keeps prompts of one shared block together
        (first-seen blocks first): each block is evaluated or restored once. The order changes
        the cost, never an answer."""
        seqs = [self.encode(p) for p in prompts]
        self.usage.prompts += len(seqs)
        self.usage.prompt_tokens += sum(map(len, seqs))
        first: dict[tuple[str | None, str], int] = {}
        for i, p in enumerate(prompts):
            first.setdefault((p.system, p.shared), i)
        return seqs, sorted(range(len(seqs)), key=lambda i: (first[(prompts[i].system, prompts[i].shared)], i))

    # ------------------------------------------------------------ the interface

    def score(self, prompts: Sequence[Prompt], k: int = DEFAULT_TOP_K) -> list[Score]:
        import numpy as np

        seqs, order = self._order(prompts)
        out: list[Score | None] = [None] * len(seqs)
        for i in order:
            self._run(prompts[i], seqs[i])
            lp = self._last_logprobs()
            top = np.argpartition(-lp, k)[:k]
            top = top[np.argsort(-lp[top])]
            out[i] = score_from_top([(int(t), float(lp[t])) for t in top], *self.verdict_ids(prompts[i].verdict), k,
                                    label=lambda t: self._vocab.detokenize([t]).decode("utf-8", "replace"))
        return out  # type: ignore[return-value]

    def top_logprobs(self, prompts: Sequence[Prompt], k: int) -> list[list[tuple[str, float]]]:
        """The top-k first tokens as (text, logprob), as an OpenAI-compatible server returns them
        (evaluated in the same pieces as `score`: the same numbers)."""
        import numpy as np

        res = []
        for p in prompts:
            self._run(p, self.encode(p))
            lp = self._last_logprobs()
            top = np.argsort(-lp)[:k]
            res.append([(self._vocab.detokenize([int(t)]).decode("utf-8", "replace"), float(lp[t])) for t in top])
        return res

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 256, json_schema: dict[str, Any] | None = None,
                 stop: Sequence[str] = ()) -> list[str]:
        """Greedy decoding token by token after the shared prefix; stops at end of turn, a stop string
        or the budget."""
        seqs, order = self._order(prompts)
        outs = [""] * len(seqs)
        eog = self.llm.token_eos()
        vocab = self.llm._model.vocab if hasattr(self.llm._model, "vocab") else None
        for i in order:
            self._run(prompts[i], seqs[i])
            gen: list[int] = []
            text = ""
            for _ in range(max_new_tokens):
                t = int(self._last_logprobs().argmax())
                if t == eog or (vocab is not None and self._llama_cpp.llama_vocab_is_eog(vocab, t)):
                    break
                gen.append(t)
                self.usage.generated_tokens += 1
                text = self._vocab.detokenize(gen).decode("utf-8", "ignore")
                if stop and any(s in text for s in stop):
                    break
                self.llm.eval([t])  # a generated token, not prompt work: counted in generated_tokens
            outs[i] = cut_at_stop(text, stop).strip()
        return outs

    def close(self) -> None:
        self._states.clear()
        self._built = None
        if self._llm is not None:
            with contextlib.suppress(Exception):
                self._llm.close()
        self._llm = None
