"""Policy losses on step records: PPO-clip with token- or step-level ratios, and k3 KL to a reference.

All functions take ``[S, L]`` tensors over S steps and their (right-aligned, padded) response tokens,
with a boolean ``mask`` of the real tokens.

Advantages come from any registered estimator as one number per step, :math:`\\hat A_t`, and are
broadcast unchanged to the step's response tokens (:func:`broadcast_to_tokens`); the loss never rescales
them.

Importance ratios ("StepPO: Step-Aligned Policy Optimization for Agentic Reinforcement Learning" eq. 6):

* ``level="token"`` — PPO's per-token ratio :math:`w^i_t = \\exp(\\log\\pi_\\theta(a_i) - \\log\\pi_{old}(a_i))`;
* ``level="step"`` — the length-normalized geometric mean over the step's :math:`L_t` tokens,
  :math:`\\bar w_t = \\exp\\big(\\tfrac{1}{L_t}\\sum_i (\\log\\pi_\\theta(a_i) - \\log\\pi_{old}(a_i))\\big)`,
  clipped once per step.

Clipped objective (eq. 7), maximized:

.. math:: J = \\mathbb{E}\\big[\\min(w \\hat A,\\ \\operatorname{clip}(w, 1-\\epsilon, 1+\\epsilon)\\hat A)\\big]

The expectation is taken by one of three aggregations (:data:`AGGREGATIONS`; verl's ``loss_agg_mode``
names the first two ``token-mean`` and ``seq-mean-token-mean``):

* ``"token-mean"`` — the mean over all response tokens of the batch (verl-agent's default; each token
  counts once, so a step with more tokens and a trajectory with more steps weigh more);
* ``"step-mean"`` — each step's token mean, averaged over steps (StepPO eq. 7: each step counts once);
* ``"trajectory-mean"`` — each step's token mean weighted by :math:`w_s = 1 / (|\\mathcal T|\\,T_{\\tau(s)})`,
  :math:`T_\\tau` the number of steps of the step's trajectory and :math:`|\\mathcal T|` the number of
  trajectories (:func:`trajectory_weights`): each trajectory counts once, whatever its length. With a
  group-normalized episode advantage (:math:`\\sum_\\tau A(\\tau) = 0` in each group) the weighted advantages of
  a group's steps then sum to zero too; under the other two a lost episode's extra steps outweigh the won
  ones (the group's step advantages sum below zero), which pushes down what every response shares.

  On a tree batch (tree rollouts) every step is one row, a shared prefix step included, so ``"token-mean"``
  and ``"step-mean"`` count it once; ``"trajectory-mean"`` counts each root-to-leaf path once
  (:func:`step_weights`: a step's weight is the sum of its paths' shares, :func:`path_weights`).

The KL penalty is the low-variance k3 estimator of :math:`KL(\\pi_\\theta \\| \\pi_{ref})` per token,
:math:`k_3 = e^{r} - r - 1` with :math:`r = \\log\\pi_{ref} - \\log\\pi_\\theta`, aggregated like the objective.
The loss minimized is :math:`-J + \\beta_{KL}\\,\\overline{k_3}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from agentgym_credit.records import StepBatch

__all__ = [
    "AGGREGATIONS",
    "LEVELS",
    "PolicyLoss",
    "aggregate",
    "broadcast_to_tokens",
    "importance_ratio",
    "kl_k3",
    "masked_mean",
    "path_weights",
    "policy_loss",
    "step_weights",
    "trajectory_weights",
]

LEVELS = ("token", "step")
AGGREGATIONS = ("token-mean", "step-mean", "trajectory-mean")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the True entries of ``mask`` (0 when there are none)."""
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1.0)


def aggregate(x: torch.Tensor, mask: torch.Tensor, how: str, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``[S, L]`` per-token values reduced to a scalar by one of :data:`AGGREGATIONS`.

    ``"trajectory-mean"`` is the ``weights``-weighted sum of the steps' token means (``weights`` from
    :func:`trajectory_weights`, summing to one over the steps they were computed for).
    """
    if how == "token-mean":
        return masked_mean(x, mask)
    m = mask.to(x.dtype)
    per_step = (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    if how == "step-mean":
        return per_step.mean() if per_step.numel() else per_step.sum()
    if how == "trajectory-mean":
        if weights is None or weights.shape != per_step.shape:
            raise ValueError(f"trajectory-mean needs one weight per step ({per_step.shape[0]}), got "
                             f"{None if weights is None else tuple(weights.shape)}")
        return (per_step * weights.to(per_step.dtype)).sum()
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {how!r}")


def trajectory_weights(traj: np.ndarray | Sequence[int]) -> np.ndarray:
    """Per step, :math:`w_s = 1 / (|\\mathcal T|\\,T_{\\tau(s)})` over the given steps' trajectories.

    Args:
        traj: the trajectory id of each step (any order; a trajectory's count is its steps in ``traj``).

    Returns:
        float64 weights summing to one, equal within a trajectory; each trajectory's steps sum to
        :math:`1 / |\\mathcal T|`.
    """
    traj = np.asarray(traj)
    if traj.size == 0:
        return np.zeros(0, dtype=np.float64)
    _, inverse, counts = np.unique(traj, return_inverse=True, return_counts=True)
    return 1.0 / (len(counts) * counts[inverse].astype(np.float64))


def path_weights(batch: StepBatch) -> np.ndarray:
    """Per row of a tree batch, :math:`c_r = \\sum_{\\ell \\in L(r)} 1 / T_\\ell`: the row's share of the
    root-to-leaf paths through it (:math:`T_\\ell` the length of leaf ℓ's path, :math:`L(r)` the row's
    descendant leaves). Over all rows they sum to the number of paths: ``"trajectory-mean"`` on a tree counts
    each episode (path) once and each of its steps equally, a shared step once with the sum of its paths'
    shares."""
    paths = batch.tree_paths()
    return np.bincount(paths.rows, weights=1.0 / paths.lengths[paths.path_of], minlength=len(batch))


def step_weights(batch: StepBatch, rows: np.ndarray) -> np.ndarray:
    """The ``"trajectory-mean"`` weights of ``rows`` of ``batch`` (one optimizer step's rows), summing to one.

    On a chain batch :func:`trajectory_weights` of the rows' trajectories (each trajectory in the rows counts
    once). On a tree batch a trajectory is a segment, not an episode: the weights are the rows'
    :func:`path_weights`, normalized over the rows (a whole tree's rows: each root-to-leaf path counts once).
    """
    rows = np.asarray(rows, dtype=np.int64)
    if not batch.is_tree:
        return trajectory_weights(batch.traj[rows])
    share = path_weights(batch)[rows]
    return share / share.sum() if rows.size else share


def broadcast_to_tokens(step_values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[S]`` per-step values copied to each of the step's response tokens (0 on padding)."""
    if step_values.shape != mask.shape[:1]:
        raise ValueError(f"{tuple(step_values.shape)} step values for {mask.shape[0]} steps")
    return step_values.unsqueeze(1).to(torch.float32) * mask.to(torch.float32)


def importance_ratio(
    logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, level: str = "token"
) -> torch.Tensor:
    """Per-token importance ratios ``[S, L]`` (1 on padding).

    Args:
        logp: log-probs under the current policy.
        old_logp: log-probs under the rollout policy.
        mask: response-token mask.
        level: ``"token"`` (per-token ratio) or ``"step"`` (the step's geometric mean on every token).
    """
    if level not in LEVELS:
        raise ValueError(f"ratio level must be one of {LEVELS}, got {level!r}")
    m = mask.to(logp.dtype)
    log_ratio = (logp - old_logp) * m
    if level == "step":
        mean = log_ratio.sum(-1) / m.sum(-1).clamp(min=1.0)
        log_ratio = mean.unsqueeze(1).expand_as(logp) * m
    return torch.exp(log_ratio)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(π_θ ‖ π_ref): :math:`e^{r} - r - 1`, :math:`r = \\log\\pi_{ref} - \\log\\pi_\\theta`."""
    r = (ref_logp - logp).clamp(-20.0, 20.0)
    return torch.exp(r) - r - 1.0


@dataclass
class PolicyLoss:
    """The loss to minimize and its parts (detached scalars except ``loss``).

    Attributes:
        loss: :math:`-J + \\beta_{KL} \\overline{k_3}`.
        pg_loss: :math:`-J`.
        kl: mean k3 (0 without a reference).
        clip_frac: share of tokens (``"token"``) or steps (``"step"``) where the clipped branch is active.
        ratio_mean: mean ratio over tokens.
        approx_kl: mean of :math:`\\tfrac12 (\\log w)^2` to the rollout policy.
    """

    loss: torch.Tensor
    pg_loss: torch.Tensor
    kl: torch.Tensor
    clip_frac: torch.Tensor
    ratio_mean: torch.Tensor
    approx_kl: torch.Tensor

    def scalars(self) -> dict[str, float]:
        return {k: float(getattr(self, k).detach()) for k in ("loss", "pg_loss", "kl", "clip_frac", "ratio_mean",
                                                             "approx_kl")}


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    level: str = "token",
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    aggregation: str | None = None,
    weights: torch.Tensor | None = None,
) -> PolicyLoss:
    """PPO-clip policy loss with optional k3 KL penalty (see the module docstring).

    Args:
        logp: ``[S, L]`` current log-probs (with gradient).
        old_logp: ``[S, L]`` rollout log-probs.
        advantages: ``[S, L]`` per-token advantages (the step's advantage on each of its tokens).
        mask: ``[S, L]`` response-token mask.
        clip_eps: ε.
        level: ``"token"`` or ``"step"`` importance ratio.
        ref_logp: ``[S, L]`` reference log-probs, or None for no KL term.
        kl_coef: β_KL.
        aggregation: one of :data:`AGGREGATIONS`; None takes the ratio level's own (``"token-mean"`` for
            ``"token"``, ``"step-mean"`` for ``"step"`` as in StepPO eq. 7).
        weights: ``[S]`` step weights of ``"trajectory-mean"`` (:func:`trajectory_weights`).
    """
    mask = mask.bool()
    how = aggregation or ("token-mean" if level == "token" else "step-mean")
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {how!r}")
    ratio = importance_ratio(logp, old_logp.detach(), mask, level)
    adv = advantages.detach().to(logp.dtype)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv
    objective = torch.minimum(unclipped, clipped)
    is_clipped = (clipped < unclipped).to(logp.dtype)
    pg = -aggregate(objective, mask, how, weights)
    if level == "token":
        clip_frac = masked_mean(is_clipped, mask)
    else:
        clip_frac = is_clipped.max(-1).values.mean() if is_clipped.numel() else is_clipped.sum()
    if ref_logp is not None and kl_coef:
        kl = aggregate(kl_k3(logp, ref_logp.detach()), mask, how, weights)
    else:
        kl = torch.zeros((), dtype=logp.dtype, device=logp.device)
    log_w = torch.log(ratio.clamp(min=1e-12))
    return PolicyLoss(
        loss=pg + kl_coef * kl,
        pg_loss=pg.detach(),
        kl=kl.detach(),
        clip_frac=clip_frac.detach(),
        ratio_mean=masked_mean(ratio, mask).detach(),
        approx_kl=masked_mean(0.5 * log_w**2, mask).detach(),
    )
