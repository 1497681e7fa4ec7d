"""The entropy of the sampling distribution, the policy's uncertainty at each response token.

EMPG ("Harnessing Uncertainty: Entropy-Modulated Policy Gradients for Long-Horizon LLM Agents", Wang et al.,
arXiv:2509.09265) modulates each step's advantage by the step's mean token entropy

.. math:: H_t = \\frac{1}{|y_t|} \\sum_{j=1}^{|y_t|} -\\sum_{v} p_j(v) \\log p_j(v), \\qquad
          p_j = \\operatorname{softmax}(z_j / T),

over the response :math:`y_t` of step :math:`t`. The samplers (:mod:`~agentgym_credit.baselines.generation`,
:mod:`~agentgym_credit.baselines.static_decode`) take :func:`token_entropy` from the log-softmax they sample
from, at no extra pass over the model; a backend that reports only the top tokens' log-probabilities (vLLM)
gives :func:`top_k_entropy`, a lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["token_entropy", "top_k_entropy"]


def token_entropy(logp: torch.Tensor, probs: torch.Tensor | None = None) -> torch.Tensor:
    """The entropy :math:`H = -\\sum_v p_v \\log p_v` of each row of log-probabilities.

    Args:
        logp: ``[B, V]`` log-probabilities (a log-softmax); a token of probability 0 (``-inf``) adds 0.
        probs: ``logp.exp()`` where the caller has it already (a sampler draws from it); computed otherwise.

    Returns:
        ``[B]``, in ``logp``'s dtype, ≥ 0.
    """
    probs = logp.exp() if probs is None else probs
    return -(probs * logp.clamp_min(torch.finfo(logp.dtype).min)).sum(-1)


def top_k_entropy(logprobs: Sequence[float]) -> float:
    """The entropy of a distribution known only by the log-probabilities of its k most likely tokens.

    The mass of the other tokens, :math:`r = 1 - \\sum_{top} p`, is counted as one outcome:
    :math:`\\hat H = -\\sum_{top} p \\log p - r \\log r`. Each token outside the top has :math:`p \\le r`, so
    :math:`-p \\log p \\ge -p \\log r` and :math:`\\hat H \\le H`: a lower bound, equal to :math:`H` when the top k
    hold every token of non-zero probability.

    Args:
        logprobs: the top tokens' log-probabilities (under the full distribution).

    Returns:
        :math:`\\hat H \\ge 0`.
    """
    p = np.exp(np.asarray(logprobs, dtype=np.float64))
    p = p[p > 0]
    rest = max(0.0, 1.0 - float(p.sum()))
    tail = -rest * np.log(rest) if rest > 0 else 0.0
    return max(0.0, float(-(p * np.log(p)).sum()) + tail)
