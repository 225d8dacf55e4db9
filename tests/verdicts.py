"""A check both local backends share: a choice verdict is read from its letters' log-probabilities."""

import pytest

from derivaudit.models.base import Prompt, logsumexp

LETTERS = (("B",), ("A", "C"))


def choice_prompt(shared: str, statement: str) -> Prompt:
    return Prompt(shared, f"Statement: {statement}\nA. true\nB. false\nC. not said\nAnswer with one letter: A, B or C.",
                  verdict=LETTERS)


def assert_reads_letters(backend, prompt: Prompt) -> None:
    """score() = log p(B) - log p(A or C) over the same first-token distribution top_logprobs() shows."""
    (s,) = backend.score([prompt])
    top = dict(backend.top_logprobs([prompt], 100)[0])
    b = [lp for t, lp in top.items() if t.strip() == "B"]
    ac = [lp for t, lp in top.items() if t.strip() in ("A", "C")]
    assert s.ok and s.logp_yes == pytest.approx(logsumexp(b), abs=1e-4)
    assert s.logp_no == pytest.approx(logsumexp(ac), abs=1e-4)
