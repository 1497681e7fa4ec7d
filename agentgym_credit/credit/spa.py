"""SPA-RL: stepwise progress attribution ("SPA-RL: Reinforcing LLM Agents via Stepwise Progress Attribution" (arXiv:2505.20732) §3.2–3.3).

A progress estimator redistributes the delayed reward into per-step contributions :math:`c_t` (the
``progress`` column, trained so that :math:`\\sum_t c_t \\approx R`). The fused immediate reward adds a
grounding signal :math:`g_t` (1 when the action executed, the ``valid`` column) (eq. 8):

.. math:: r_t^{fused} = \\alpha\\, c_t + \\beta\\, g_t

and replaces the sparse reward in advantage estimation:

* ``mode="gae"``: step GAE with the critic's ``value`` column,
  :math:`\\delta_t = r^{fused}_t + \\gamma V(s_{t+1}) - V(s_t)` (the paper's PPO setting); ``whiten=True``
  standardizes these advantages across the batch, as the PPO implementations SPA-RL trains with (TRL's,
  verl's) do;
* ``mode="group"``: critic-free — discounted fused returns
  :math:`R_t = \\sum_{k \\ge t} \\gamma^{k-t} r^{fused}_k`, normalized over the rows of the task group;
* ``mode="auto"`` (default): ``"gae"`` when the batch has a ``value`` column, else ``"group"``.

An invalid-action penalty in the batch's ``penalty`` column is charged to its own step: subtracted from
the step's GAE advantage (not from the critic's target) or from its discounted return before the group
normalization.

In either mode :math:`\\beta g_t` pays β for every executable step, while the progress contributions sum to
the outcome whatever the episode's length: where every action executes, a detour that costs less than β per
added step in outcome and step costs gets a higher advantage than the shorter path (the paper's formula; the
documentation's *Evaluation* page, "Credit quality against ground truth", measures it: Spearman ρ with the
solver's step quality −0.22 at β = 0.5, +0.43 at β = 0, Sokoban ε = 0.3).

``"group"`` is this library's critic-free variant, not the paper's. It compares returns of steps at every depth
of the group's trajectories with one another, and a step's discounted fused return grows with the number of
executable steps after it (β per step), so with β > 0 earlier steps get higher advantages than later ones
whatever the outcome. On two-step SearchQA episodes (search, answer) every first step got ≈ +1 and every
answer ≈ −1 from the third iteration on, winners' answers included, and the policy learned to search again
instead of answering (held-out success 0.39 → 0.00; the documentation's *Training an LLM policy* page,
"The first start (0.391): falls and their causes").
The bundled trainer therefore gives ``spa`` a critic (``"gae"``) unless ``mode="group"`` is asked for.

A tree batch (a ``parent`` column with branches) raises :class:`~agentgym_credit.errors.TreeBatchError`,
as for step GAE (``batch.as_paths()`` gives the root-to-leaf paths as separate trajectories).

Paper defaults: α = 1, β = 0.5.
"""

from __future__ import annotations

import numpy as np

from agentgym_credit.credit.episode import charge_penalty
from agentgym_credit.credit.grouping import dense_ids, discounted_returns, group_normalize
from agentgym_credit.credit.parameters import (
    check_choice,
    check_flag,
    check_not_all_zero,
    check_real,
    check_weight,
)
from agentgym_credit.credit.registry import Credit, register_estimator
from agentgym_credit.credit.step_gae import batch_whiten, gae
from agentgym_credit.errors import MissingColumnError
from agentgym_credit.records import StepBatch

__all__ = ["spa", "fused_reward"]


def fused_reward(batch: StepBatch, alpha: float = 1.0, beta: float = 0.5) -> np.ndarray:
    """:math:`r_t^{fused} = \\alpha c_t + \\beta g_t` per row (``progress`` column, ``valid`` as g)."""
    if batch.progress is None:
        raise MissingColumnError(
            "spa needs per-step progress: build the batch with a 'progress' column "
            "(e.g. from agentgym_credit.baselines' progress estimator)"
        )
    return alpha * batch.progress + beta * batch.valid.astype(np.float64)


@register_estimator("spa")
def spa(
    batch: StepBatch,
    *,
    alpha: float = 1.0,
    beta: float = 0.5,
    gamma: float = 0.99,
    lam: float = 0.95,
    mode: str = "auto",
    norm: str = "std",
    whiten: bool = False,
) -> Credit:
    """SPA advantages from fused progress + grounding rewards.

    Args:
        batch: the rollout batch with a ``progress`` column (and ``value`` for ``mode="gae"``).
        alpha: α in [0, 10^6], weight of the progress contribution (paper: 1).
        beta: β in [0, 10^6], weight of the grounding signal (paper: 0.5); not both 0.
        gamma: γ, step discount.
        lam: λ, GAE trace parameter (``mode="gae"``).
        mode: ``"auto"``, ``"gae"`` or ``"group"``.
        norm: F_norm for ``mode="group"`` (``"std"`` or ``"none"``).
        whiten: standardize the GAE advantages across the batch (``mode="gae"``; group mode normalizes already).
    """
    alpha = check_weight("alpha", alpha)
    gamma = check_real("gamma", gamma, low=0.0, high=1.0)
    lam = check_real("lam", lam, low=0.0, high=1.0)
    beta = check_weight("beta", beta)
    check_not_all_zero(alpha=alpha, beta=beta)
    check_choice("mode", mode, ("auto", "gae", "group"))
    check_choice("norm", norm, ("std", "none"))
    whiten = check_flag("whiten", whiten)
    fused = fused_reward(batch, alpha, beta)
    if mode == "auto":
        mode = "gae" if batch.value is not None else "group"
    if mode == "gae":
        if batch.value is None:
            raise MissingColumnError("spa with mode='gae' needs a 'value' column; use mode='group' without a critic")
        env_adv = gae(batch, fused, batch.value, gamma, lam)
        returns = env_adv + batch.value
        adv = charge_penalty(batch, env_adv)
        if whiten:
            adv = batch_whiten(adv)
    elif mode == "group":
        returns = charge_penalty(batch, discounted_returns(fused, batch.order, batch.traj_starts, gamma))
        gid, k = dense_ids(batch.group)
        adv = group_normalize(returns, gid, k, norm=norm)
    else:
        raise ValueError(f"mode must be 'auto', 'gae' or 'group', got {mode!r}")
    return Credit(adv, returns, {"fused_reward": fused})
