"""The sampling distribution's entropy: per token from a log-softmax, and the lower bound from the top tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentgym_credit.baselines.entropy import token_entropy, top_k_entropy


def test_token_entropy_is_the_categorical_entropy_of_each_row():
    logits = torch.randn(5, 37, generator=torch.Generator().manual_seed(0)) * 3
    logp = torch.log_softmax(logits, dim=-1)
    expected = torch.distributions.Categorical(logits=logits).entropy()
    torch.testing.assert_close(token_entropy(logp), expected, atol=1e-5, rtol=0)
    # a uniform row has log V, a one-hot row 0 (its -inf entries add nothing, no NaN)
    uniform = torch.log_softmax(torch.zeros(1, 8), dim=-1)
    assert float(token_entropy(uniform)) == pytest.approx(np.log(8), abs=1e-6)
    one_hot = torch.tensor([[0.0, -float("inf"), -float("inf")]])
    assert float(token_entropy(one_hot)) == 0.0
    # the sampler passes the probabilities it drew from: the same bits as computing them again
    assert torch.equal(token_entropy(logp, logp.exp()), token_entropy(logp))


def test_top_k_entropy_is_a_lower_bound_exact_with_every_token():
    rng = np.random.default_rng(1)
    for _ in range(20):
        logits = rng.normal(size=50) * rng.uniform(0.5, 4)
        logp = logits - np.logaddexp.reduce(logits)
        full = float(-(np.exp(logp) * logp).sum())
        assert top_k_entropy(logp) == pytest.approx(full, abs=1e-12)  # every token given: the entropy itself
        top = np.sort(logp)[::-1]
        bounds = [top_k_entropy(top[:k]) for k in (1, 5, 20, 49)]
        assert all(b <= full + 1e-12 for b in bounds)
        assert bounds == sorted(bounds)  # more tokens, a tighter bound
    # two outcomes: the top token and the rest as one, e.g. p = 0.75 → −0.75 log 0.75 − 0.25 log 0.25
    assert top_k_entropy([np.log(0.75)]) == pytest.approx(-0.75 * np.log(0.75) - 0.25 * np.log(0.25))
    assert top_k_entropy([0.0]) == 0.0
