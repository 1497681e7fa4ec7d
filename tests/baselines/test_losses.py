"""Importance ratios, clipping, the KL term and the loss aggregations against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from agentgym_credit.baselines.losses import (
    aggregate,
    broadcast_to_tokens,
    importance_ratio,
    kl_k3,
    masked_mean,
    policy_loss,
    trajectory_weights,
)
from agentgym_credit.credit import compute_advantages
from agentgym_credit.records import StepBatch

# two steps: step 0 has 3 tokens, step 1 has 1 token (right-aligned)
MASK = torch.tensor([[True, True, True], [False, False, True]])
OLD = torch.tensor([[-1.0, -2.0, -0.5], [0.0, 0.0, -1.0]])
NEW = torch.tensor([[-0.9, -2.3, -0.2], [0.0, 0.0, -0.5]])  # log-ratios 0.1, -0.3, 0.3 | 0.5


def test_token_ratio_is_per_token_exp_of_log_ratio():
    ratio = importance_ratio(NEW, OLD, MASK, "token")
    expected = torch.tensor([[math.exp(0.1), math.exp(-0.3), math.exp(0.3)], [1.0, 1.0, math.exp(0.5)]])
    torch.testing.assert_close(ratio, expected)


def test_step_ratio_is_geometric_mean_over_the_steps_tokens():
    ratio = importance_ratio(NEW, OLD, MASK, "step")
    g0 = math.exp((0.1 - 0.3 + 0.3) / 3)  # (∏ w_i)^(1/L)
    expected = torch.tensor([[g0, g0, g0], [1.0, 1.0, math.exp(0.5)]])
    torch.testing.assert_close(ratio, expected)


def test_token_level_clipped_loss_by_hand():
    adv = broadcast_to_tokens(torch.tensor([2.0, -1.0]), MASK)
    out = policy_loss(NEW, OLD, adv, MASK, clip_eps=0.2, level="token")
    eps = 0.2
    terms = []
    for w, a in [(math.exp(0.1), 2.0), (math.exp(-0.3), 2.0), (math.exp(0.3), 2.0), (math.exp(0.5), -1.0)]:
        terms.append(min(w * a, min(max(w, 1 - eps), 1 + eps) * a))
    assert out.pg_loss.item() == pytest.approx(-sum(terms) / 4, rel=1e-6)
    # only exp(0.3) > 1 + ε with A > 0 takes the clipped branch; exp(0.5) with A < 0 keeps the unclipped one
    assert out.clip_frac.item() == pytest.approx(1 / 4)


def test_step_level_clipped_loss_by_hand():
    adv = broadcast_to_tokens(torch.tensor([2.0, -1.0]), MASK)
    out = policy_loss(NEW, OLD, adv, MASK, clip_eps=0.2, level="step")
    g0, g1 = math.exp(0.1 / 3), math.exp(0.5)
    j0 = min(g0 * 2.0, min(max(g0, 0.8), 1.2) * 2.0)  # inside the clip range
    j1 = min(g1 * -1.0, min(max(g1, 0.8), 1.2) * -1.0)  # ratio 1.65 with A < 0: unclipped (more negative)
    assert out.pg_loss.item() == pytest.approx(-(j0 + j1) / 2, rel=1e-6)
    assert j1 == pytest.approx(-g1)
    # a step ratio beyond 1 + eps with a positive advantage is clipped for every token of the step
    big = OLD.clone()
    big[0] -= 0.6  # log-ratio +0.6 on every token of step 0 → w̄ = e^0.6 > 1.2
    clipped = policy_loss(NEW, big, adv, MASK, clip_eps=0.2, level="step")
    assert clipped.pg_loss.item() == pytest.approx(-(1.2 * 2.0 + j1) / 2, rel=1e-6)
    assert clipped.clip_frac.item() == pytest.approx(0.5)


def test_gradient_flows_only_through_unclipped_steps():
    logp = NEW.clone().requires_grad_(True)
    big = OLD.clone()
    big[0] -= 0.6
    adv = broadcast_to_tokens(torch.tensor([2.0, -1.0]), MASK)
    policy_loss(logp, big, adv, MASK, clip_eps=0.2, level="step").loss.backward()
    assert torch.all(logp.grad[0] == 0)  # clipped step: no gradient
    assert logp.grad[1, 2] != 0


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    assert torch.all(kl_k3(NEW, NEW) == 0)
    r = torch.tensor(0.4)
    assert kl_k3(torch.tensor(0.0), r).item() == pytest.approx(math.exp(0.4) - 0.4 - 1)
    out = policy_loss(NEW, OLD, torch.zeros_like(NEW), MASK, ref_logp=OLD, kl_coef=0.5)
    expected = masked_mean(kl_k3(NEW, OLD), MASK)
    assert out.kl.item() == pytest.approx(expected.item())
    assert out.loss.item() == pytest.approx(0.5 * expected.item())


def test_broadcast_keeps_advantages_unchanged_on_every_response_token():
    adv = broadcast_to_tokens(torch.tensor([1.25, -3.5]), MASK)
    assert adv.tolist() == [[1.25, 1.25, 1.25], [0.0, 0.0, -3.5]]
    with pytest.raises(ValueError):
        broadcast_to_tokens(torch.ones(3), MASK)
    with pytest.raises(ValueError):
        importance_ratio(NEW, OLD, MASK, "sequence")


def test_trajectory_weights_count_each_trajectory_once():
    traj = np.array([7, 7, 7, 7, 3, 9, 9])
    w = trajectory_weights(traj)
    assert w.sum() == pytest.approx(1.0)
    for t in np.unique(traj):
        assert w[traj == t].sum() == pytest.approx(1 / 3)  # three trajectories, whatever their lengths
    np.testing.assert_allclose(w[:4], 1 / 12)
    assert trajectory_weights([]).shape == (0,)


def test_aggregations_by_hand():
    x = torch.tensor([[1.0, 2.0, 3.0], [9.0, 9.0, 4.0]])  # the masked-out 9s never count
    assert aggregate(x, MASK, "token-mean").item() == pytest.approx((1 + 2 + 3 + 4) / 4)
    assert aggregate(x, MASK, "step-mean").item() == pytest.approx((2.0 + 4.0) / 2)
    w = torch.tensor([0.25, 0.75])
    assert aggregate(x, MASK, "trajectory-mean", w).item() == pytest.approx(0.25 * 2.0 + 0.75 * 4.0)
    with pytest.raises(ValueError, match="one weight per step"):
        aggregate(x, MASK, "trajectory-mean")
    with pytest.raises(ValueError, match="aggregation must be one of"):
        aggregate(x, MASK, "sum")
    with pytest.raises(ValueError, match="aggregation must be one of"):
        policy_loss(NEW, OLD, torch.zeros_like(NEW), MASK, aggregation="sequence-mean")


def test_policy_loss_aggregates_objective_and_kl_alike():
    adv = broadcast_to_tokens(torch.tensor([2.0, -1.0]), MASK)
    w = torch.tensor([0.2, 0.8])
    out = policy_loss(NEW, NEW.detach(), adv, MASK, ref_logp=OLD, kl_coef=0.5, aggregation="trajectory-mean",
                      weights=w)
    assert out.pg_loss.item() == pytest.approx(-(0.2 * 2.0 + 0.8 * -1.0))  # ratio 1: -Σ w_s A_s
    k3 = kl_k3(NEW, OLD)
    kl = 0.2 * k3[0].mean() + 0.8 * k3[1, 2]
    assert out.kl.item() == pytest.approx(kl.item())
    assert out.loss.item() == pytest.approx(out.pg_loss.item() + 0.5 * kl.item())
    # the default keeps the ratio level's own aggregation
    step = policy_loss(NEW, NEW.detach(), adv, MASK, level="step")
    assert step.pg_loss.item() == pytest.approx(-(2.0 - 1.0) / 2)
    token_as_step = policy_loss(NEW, NEW.detach(), adv, MASK, level="token", aggregation="step-mean")
    assert token_as_step.pg_loss.item() == pytest.approx(-(2.0 - 1.0) / 2)


def test_only_trajectory_mean_balances_a_groups_episode_advantages():
    """GRPO: a won 1-step episode and a lost 4-step one. Every row carries its episode's advantage, so per
    step (or per token) the group's advantages sum below zero; per trajectory they cancel."""
    won = [{"state": "s", "action": "a", "next_state": "win", "reward": 10.0}]
    lost = [{"state": s, "action": "b", "next_state": s + "'", "reward": 0.0} for s in "suvx"]
    batch = StepBatch.from_trajectories([{"group": 0, "steps": won, "success": True},
                                         {"group": 0, "steps": lost, "success": False}])
    adv = compute_advantages(batch, "grpo")
    assert adv[0] > 0 > adv[1]
    assert adv.mean() < -0.3  # step-mean: the lost episode's four steps win
    assert float(trajectory_weights(batch.traj) @ adv) == pytest.approx(0.0, abs=1e-12)


def test_trajectory_mean_on_a_tree_counts_each_root_to_leaf_path_once():
    from agentgym_credit.baselines.losses import path_weights, step_weights
    from agentgym_credit.records import Step, StepBatch, Trajectory

    # segment 0: steps t=0, 1 (a leaf); segment 1 continues step t=0 of segment 0 with t=1, 2
    batch = StepBatch.from_trajectories([
        Trajectory(0, [Step("s", "a", "u", 0.0), Step("u", "b", "v", 1.0)], True, traj=0),
        Trajectory(0, [Step("s", "c", "w", 0.0), Step("w", "d", "x", 0.0)], False, traj=1, parent=(0, 0)),
    ])
    np.testing.assert_allclose(path_weights(batch), [1 / 2 + 1 / 3, 1 / 2, 1 / 3, 1 / 3])
    np.testing.assert_allclose(step_weights(batch, np.arange(4)), np.array([5 / 6, 1 / 2, 1 / 3, 1 / 3]) / 2)
    part = step_weights(batch, np.array([1, 2]))
    assert part.sum() == pytest.approx(1.0) and part[0] > part[1]
    chains = batch.as_paths()
    np.testing.assert_allclose(step_weights(chains, np.arange(len(chains))), trajectory_weights(chains.traj))
