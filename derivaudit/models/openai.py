"""OpenAI-compatible HTTP backend: one or several servers (`vllm serve`, llama.cpp's server).

For users who outgrow one machine: run `vllm serve MODEL --max-logprobs 100` on each box (or one
data-parallel / multi-node deployment) and pass every `--base-url`. Requests are sharded by the
prompt's shared evidence block, so all views of one memory hit the same server's prefix cache.
Concurrency is bounded; 429, 5xx and timeouts are retried with exponential backoff (honouring
Retry-After). A server that cannot be reached (connection refused), or that keeps failing after
its retries, is taken out of the fleet for the rest of the run and its requests go to the next
live server in a fixed order: a lost node costs the retries of its in-flight requests, not the
scan; only when every server is gone is it an error. A server that answers but refuses the
request (4xx), answers without logprobs or with something that is not JSON is named in the error:
more servers would not help. Log-odds are read from the top 100 first tokens where the server
allows it (DerivAudit's k): without `--top-logprobs` the backend asks the fleet's first server for
100 once and, when it refuses, for the cap its error names (vLLM's default `--max-logprobs` is 20,
OpenAI's API allows 20). The cap used is part of the model's identity, so it is recorded in the
run and a result cached under another cap is never reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from .base import (
    DEFAULT_TOP_K,
    Backend,
    BackendError,
    Prompt,
    Score,
    VerdictIds,
    cut_at_stop,
    score_from_top,
    word_variants,
)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class _Unreachable(Exception):
    """A server that cannot be reached, or still fails after its retries: the fleet goes on without it."""


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_urls: Sequence[str] = ("http://127.0.0.1:8000/v1",),
        api_key: str | None = None,
        top_logprobs: int | None = None,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        seed: int = 0,
    ):
        super().__init__()
        if not base_urls:
            raise BackendError("the openai backend needs at least one --base-url")
        self.model = model
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self._top_logprobs = top_logprobs  # None: the most the server allows, up to DEFAULT_TOP_K
        self.concurrency = max(1, concurrency)
        self.max_retries = max_retries
        self.backoff = backoff
        self.seed = seed
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.client = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {key}"},
                                   limits=httpx.Limits(max_connections=self.concurrency * len(self.base_urls)))
        self.verdict_ids = VerdictIds(lambda w: set(word_variants(w)))
        self.retries = 0
        self.dead: dict[str, str] = {}  # url -> why it left the fleet
        self.failovers = 0
        self._lock = threading.Lock()

    @property
    def top_logprobs(self) -> int:
        """How many first tokens a score reads: as asked, else found from the server once."""
        if self._top_logprobs is None:
            self._top_logprobs = self._server_cap()
        return self._top_logprobs

    def _server_cap(self) -> int:
        """Ask for DEFAULT_TOP_K top log-probabilities once; a server that refuses says its cap in
        the error (vLLM: "... greater than max allowed: 20"; OpenAI: "... less than or equal to 20")."""
        probe = Prompt(shared="", task="Answer with one word, yes or no: is water wet?")
        try:
            self._request(probe, self._body(probe, max_tokens=1, logprobs=True, top_logprobs=DEFAULT_TOP_K))
            return DEFAULT_TOP_K
        except BackendError as e:
            if "HTTP 400" not in str(e) and "HTTP 422" not in str(e):
                raise
            named = [int(x) for x in re.findall(r"\d+", str(e).split("HTTP 4", 1)[1][2:]) if 0 < int(x) < DEFAULT_TOP_K]
            cap = max(named, default=20)
            print(f"derivaudit: the server allows {cap} top log-probabilities, not {DEFAULT_TOP_K}; scores read the "
                  f"top {cap} (a yes or no outside them is a bounded score)", file=sys.stderr)
            return cap

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "top_logprobs_cap": self.top_logprobs}

    def _servers(self, prompt: Prompt) -> list[str]:
        """The fleet in the order this prompt tries it: its shard (by evidence block) first."""
        h = int.from_bytes(hashlib.sha256(prompt.shared.encode()).digest()[:8], "big") % len(self.base_urls)
        return self.base_urls[h:] + self.base_urls[:h]

    def _request(self, prompt: Prompt, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Post to the prompt's shard, failing over to the next live server when one is lost."""
        tried = []
        for url in self._servers(prompt):
            if url in self.dead:
                continue
            try:
                return url, self._post(url, body, give_up_on_connect=len(self.base_urls) - len(self.dead) > 1)
            except _Unreachable as e:
                with self._lock:
                    if url not in self.dead:
                        self.dead[url] = str(e)
                        print(f"derivaudit: {url} left the fleet ({e}); its requests go to the other servers",
                              file=sys.stderr)
                    self.failovers += 1
                tried.append(f"{url}: {e}")
        why = "; ".join(tried) or "; ".join(f"{u}: {w}" for u, w in self.dead.items())
        raise BackendError(f"no server of the fleet answers ({why})")

    def _post(self, url: str, body: dict[str, Any], give_up_on_connect: bool = False) -> dict[str, Any]:
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                r = self.client.post(f"{url}/chat/completions", json=body)
            except httpx.ConnectError as e:
                if give_up_on_connect:  # nothing listens there: another server takes it at once
                    raise _Unreachable(f"{type(e).__name__}: {e}") from None
                last = f"{type(e).__name__}: {e}"
                wait = self.backoff * 2**attempt
            except (httpx.TimeoutException, httpx.TransportError) as e:
                last = f"{type(e).__name__}: {e}"
                wait = self.backoff * 2**attempt
            else:
                if r.status_code == 200:
                    try:
                        return r.json()
                    except ValueError:
                        raise BackendError(f"{url} answered with something that is not JSON: "
                                           f"{r.text[:200]!r}") from None
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                if r.status_code not in RETRY_STATUS:
                    raise BackendError(f"{url} refused the request: {last}")
                try:
                    wait = float(r.headers.get("retry-after", ""))
                except ValueError:
                    wait = self.backoff * 2**attempt
            if attempt < self.max_retries:
                self.retries += 1
                time.sleep(min(wait, 30.0))
        raise _Unreachable(f"failed after {self.max_retries + 1} attempts: {last}")

    def _body(self, prompt: Prompt, **extra: Any) -> dict[str, Any]:
        body = {"model": self.model, "messages": prompt.messages(), "temperature": 0, "seed": self.seed,
                "chat_template_kwargs": {"enable_thinking": False}, **extra}
        if prompt.answer_prefix:  # vLLM: continue a partial assistant message
            body["messages"] = [*body["messages"], {"role": "assistant", "content": prompt.answer_prefix}]
            body.update(continue_final_message=True, add_generation_prompt=False)
        return body

    def _map(self, fn, prompts: Sequence[Prompt]) -> list[Any]:
        with ThreadPoolExecutor(max_workers=self.concurrency * len(self.base_urls)) as pool:
            return list(pool.map(fn, prompts))

    def score(self, prompts: Sequence[Prompt], k: int = DEFAULT_TOP_K) -> list[Score]:
        k_used = min(k, self.top_logprobs)

        def one(p: Prompt) -> Score:
            url, data = self._request(p, self._body(p, max_tokens=1, logprobs=True, top_logprobs=k_used))
            try:
                first = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            except (KeyError, IndexError, TypeError):
                raise BackendError(
                    f"{url} returned no logprobs for model {self.model!r}; the server must support "
                    "logprobs/top_logprobs on chat completions (vLLM: start it with --max-logprobs >= "
                    f"{k_used})"
                ) from None
            usage = data.get("usage") or {}
            self.usage.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            details = usage.get("prompt_tokens_details") or {}
            self.usage.computed_tokens += int(usage.get("prompt_tokens") or 0) - int(details.get("cached_tokens") or 0)
            top = sorted(((t["token"], float(t["logprob"])) for t in first), key=lambda x: -x[1])
            return score_from_top(top, *self.verdict_ids(p.verdict), k_used)

        out = self._map(one, prompts)
        self.usage.prompts += len(prompts)
        self.usage.calls += len(prompts)
        return out

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: int = 256,
                 json_schema: dict[str, Any] | None = None, stop: Sequence[str] = ()) -> list[str]:
        extra: dict[str, Any] = {"max_tokens": max_new_tokens}
        if stop:
            extra["stop"] = list(stop)
        if json_schema is not None:
            extra["response_format"] = {"type": "json_schema",
                                        "json_schema": {"name": "output", "schema": json_schema}}

        def one(p: Prompt) -> str:
            _, data = self._request(p, self._body(p, **extra))
            self.usage.generated_tokens += int((data.get("usage") or {}).get("completion_tokens") or 0)
            return cut_at_stop(str(data["choices"][0]["message"].get("content") or ""), stop).strip()

        out = self._map(one, prompts)
        self.usage.prompts += len(prompts)
        self.usage.calls += len(prompts)
        return out

    def close(self) -> None:
        self.client.close()
