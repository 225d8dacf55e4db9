"""The one interface every model backend implements, and the paper's log-odds scoring rule.

A verdict is read, never sampled (DerivAudit, App. F): one forward pass, the log-probabilities of
the first generated token, and score = log p(yes) - log p(no), each word summed over the
tokenizer's variants (case, leading space). Only the top-k (default 100) are looked at:
- neither word among them -> a scoring error (counted and reported, never a middle score);
- only one word among them -> the missing word's log-probability is bounded from above by the
  k-th (smallest shown) log-probability, and the score is flagged `bounded`. The bound makes the
  score conservative in magnitude: the true log-odds is at least as extreme as reported.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

YES, NO = "yes", "no"
DEFAULT_TOP_K = 100

Verdict = tuple[tuple[str, ...], tuple[str, ...]]
YES_NO: Verdict = ((YES,), (NO,))
"""The answer words a verdict is read from: (words for, words against). Yes/no by default; a
multiple-choice question reads its letters, e.g. (("B",), ("A", "C")) = log p(B) - log p(A or C)."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A user message split into the part shared by every prompt of one memory (evidence and
    record) and the view-specific part. Backends render `shared + task` through the model's
    chat template; the split lets them compute the shared prefix once."""

    shared: str
    task: str
    system: str | None = None
    answer_prefix: str = ""  # the start of the assistant's reply, to steer the output format
    verdict: Verdict = YES_NO  # which first tokens count for and against (score only)

    @property
    def text(self) -> str:
        return self.shared + self.task

    def messages(self) -> list[dict[str, str]]:
        msgs = [{"role": "system", "content": self.system}] if self.system else []
        return [*msgs, {"role": "user", "content": self.text}]


@dataclass(slots=True)
class Score:
    """One verdict. `logodds` is None exactly when `error` is set."""

    logodds: float | None
    logp_yes: float | None = None
    logp_no: float | None = None
    bounded: bool = False
    error: str | None = None
    k: int = DEFAULT_TOP_K
    top: list[tuple[str, float]] = field(default_factory=list)  # the 5 most likely first tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Score:
        d = dict(d)
        d["top"] = [tuple(x) for x in d.get("top", [])]
        return cls(**d)

    @property
    def ok(self) -> bool:
        return self.error is None


def logsumexp(xs: Iterable[float]) -> float:
    xs = list(xs)
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def score_from_top(
    top: Sequence[tuple[Hashable, float]],
    yes: set[Hashable],
    no: set[Hashable],
    k: int,
    label: Any = str,
) -> Score:
    """Apply the scoring rule to the top-k (token, logprob) pairs of the first generated token,
    sorted by decreasing log-probability. `yes`/`no` are the variant tokens of each word."""
    top = list(top)[:k]
    preview = [(str(label(t)), round(lp, 4)) for t, lp in top[:5]]
    ly = [lp for t, lp in top if t in yes]
    ln = [lp for t, lp in top if t in no]
    if not ly and not ln:
        return Score(None, error=f"neither yes nor no among the top {len(top)} tokens", k=k, top=preview)
    floor = top[-1][1]
    lpy = logsumexp(ly) if ly else floor
    lpn = logsumexp(ln) if ln else floor
    return Score(lpy - lpn, lpy, lpn, bounded=not (ly and ln), k=k, top=preview)


def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common token prefix, leaving at least one token in every sequence."""
    limit = min(len(s) for s in seqs) - 1
    first = seqs[0]
    n = 0
    while n < limit and all(s[n] == first[n] for s in seqs):
        n += 1
    return n


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the first stop string (backends may stop after it or not at all)."""
    for s in stop:
        i = text.find(s)
        if i >= 0:
            text = text[:i]
    return text


def word_variants(word: str) -> list[str]:
    """Surface forms of a verdict word that count as that word: case and a leading space. A
    one-letter choice keeps its case ("a" is an article, not option A)."""
    forms = dict.fromkeys([word] if len(word) == 1 else [word.lower(), word.capitalize(), word.upper()])
    return [p + f for f in forms for p in ("", " ")]


def variant_ids(tokenizer: Any, word: str) -> set[int]:
    """Token ids that spell `word` on their own in this tokenizer (case and leading-space variants)."""
    out = set()
    for form in word_variants(word):
        ids = tokenizer.encode(form, add_special_tokens=False)
        if len(ids) == 1 and tokenizer.decode(ids).strip().lower() == word.lower():
            out.add(ids[0])
    return out


class VerdictIds:
    """The token ids (or strings) of each verdict's words, computed once per verdict. `ids_of`
    maps one word to the set of its single-token forms."""

    def __init__(self, ids_of: Callable[[str], set[Hashable]]):
        self.ids_of = ids_of
        self._memo: dict[Verdict, tuple[set[Hashable], set[Hashable]]] = {}

    def __call__(self, verdict: Verdict) -> tuple[set[Hashable], set[Hashable]]:
        if verdict not in self._memo:
            sides = tuple(set().union(*(self.ids_of(w) for w in words)) for words in verdict)
            missing = [w for words in verdict for w in words if not self.ids_of(w)]
            if missing:
                raise BackendError(f"no single-token form of {', '.join(map(repr, missing))} in this tokenizer")
            self._memo[verdict] = sides  # type: ignore[assignment]
        return self._memo[verdict]


@dataclass
class Usage:
    """What a backend did, for benchmarks and run metadata."""

    prompts: int = 0
    prompt_tokens: int = 0  # tokens in all rendered prompts
    computed_tokens: int = 0  # tokens actually run through the model (less with prefix reuse)
    generated_tokens: int = 0
    calls: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Backend(ABC):
    """A causal LM that can score yes/no verdicts and generate short text.

    Subclasses register themselves in `derivaudit.models.BACKENDS` by `name`.
    """

    name: str = ""
    # How many uncached prompts the result cache sends in one call before it stores their answers
    # (None: all in one call). Set by a local backend whose answers do not depend on the batch (one
    # prompt at a time anyway), so a run killed in a long call (a calibration: 200+ prompts, half
    # an hour on 2 cores) keeps what it computed; never by a batching engine, whose batches are speed.
    commit_every: int | None = None

    def __init__(self) -> None:
        self.usage = Usage()

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything about the model that changes an answer: backend, model id and revision or
        file hash, chat-template hash. Used in cache keys and run metadata. Never where the model
        lies: the same file at another path (a moved home, another machine) answers the same."""

    def identity_aliases(self) -> list[dict[str, Any]]:
        """Identities earlier versions cached this model's answers under (they held the file's
        path); read on a miss, so an upgrade does not turn a warm cache cold."""
        return []

    @abstractmethod
    def score(self, prompts: Sequence[Prompt], k: int = DEFAULT_TOP_K) -> list[Score]:
        """Log-odds verdicts, one per prompt, in order."""

    @abstractmethod
    def generate(
        self, prompts: Sequence[Prompt], max_new_tokens: int = 256, json_schema: dict[str, Any] | None = None,
        stop: Sequence[str] = (),
    ) -> list[str]:
        """Greedy (temperature 0) completions, one per prompt, cut before the first `stop` string.
        `json_schema` constrains the output where the backend supports structured output; callers
        validate either way."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model memory or connections."""


def usage_report(backend: Any) -> dict[str, Any]:
    """A backend's model work so far, with the result cache's hits and misses where it has one
    (run metadata, replay.json, the terminal line)."""
    u = backend.usage.to_dict()
    if hasattr(backend, "hits"):
        u.update(cache_hits=backend.hits, cache_misses=backend.misses)
    return u


class BackendError(RuntimeError):
    """A backend cannot run: missing optional package, unreachable server, bad model path."""


def option_probs(logodds: Sequence[float | None]) -> list[float] | None:
    """Each option letter's share of the options' probability, from its log-odds against the other
    letters (a multiple-choice question read one letter at a time); None if one could not be scored."""
    if any(x is None for x in logodds):
        return None
    sig = [1 / (1 + math.exp(-x)) if x > -700 else 0.0 for x in logodds]  # type: ignore[operator]
    total = sum(sig)
    return [s / total for s in sig] if total else None
