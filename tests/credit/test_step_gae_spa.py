from __future__ import annotations

import numpy as np
import pytest

from agentgym_credit.credit import assign_credit, compute_advantages
from agentgym_credit.errors import MissingColumnError
from agentgym_credit.records import Step, StepBatch, Trajectory


def _batch() -> StepBatch:
    return StepBatch.from_trajectories([
        Trajectory(group=0, success=True, steps=[
            Step("a", "x", "b", 0.0, valid=True, value=0.5, progress=0.2),
            Step("b", "y", "c", 1.0, valid=False, value=1.0, progress=0.1),
            Step("c", "z", "d", 10.0, valid=True, value=4.0, progress=0.7),
        ]),
        Trajectory(group=0, success=False, steps=[
            Step("a", "w", "e", 0.0, valid=True, value=0.4, progress=-0.1),
            Step("e", "v", "f", 0.0, valid=True, value=0.2, progress=0.0),
        ]),
        Trajectory(group=1, success=False, steps=[Step("p", "q", "r", 2.0, valid=False, value=1.0, progress=0.3)]),
    ])


def reference_gae(rewards, values, gamma, lam):
    """Textbook backward recursion A_t = delta_t + gamma*lam*A_{t+1}, V_{T+1} = 0."""
    adv, last = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        nv = values[t + 1] if t + 1 < len(values) else 0.0
        delta = rewards[t] + gamma * nv - values[t]
        last = delta + gamma * lam * last
        adv[t] = last
    return adv


@pytest.mark.parametrize("gamma, lam", [(0.99, 1.0), (0.9, 0.95), (1.0, 0.0)])
def test_step_gae_matches_hand_recursion(gamma, lam):
    b = _batch()
    c = assign_credit(b, "step_gae", gamma=gamma, lam=lam)
    expect = (reference_gae([0.0, 1.0, 10.0], [0.5, 1.0, 4.0], gamma, lam)
              + reference_gae([0.0, 0.0], [0.4, 0.2], gamma, lam)
              + reference_gae([2.0], [1.0], gamma, lam))
    np.testing.assert_allclose(c.advantages, expect)
    np.testing.assert_allclose(c.returns, np.array(expect) + b.value)


def test_step_gae_by_hand_numbers():
    # gamma=0.9, lam=0.5: deltas of traj 0: 0+0.9*1-0.5=0.4, 1+0.9*4-1=3.6, 10-4=6
    c = compute_advantages(_batch(), "step_gae", gamma=0.9, lam=0.5)
    np.testing.assert_allclose(c[:3], [0.4 + 0.45 * (3.6 + 0.45 * 6), 3.6 + 0.45 * 6, 6.0])


def test_step_gae_whiten_and_missing_value():
    b = _batch()
    w = compute_advantages(b, "step_gae", whiten=True)
    assert abs(w.mean()) < 1e-9 and abs(w.std(ddof=1) - 1) < 1e-5
    with pytest.raises(MissingColumnError, match="value"):
        compute_advantages(b.with_columns(value=None), "step_gae")


def test_spa_fused_reward_and_modes():
    b = _batch()
    c = assign_credit(b, "spa", alpha=1.0, beta=0.5, mode="group", gamma=1.0)
    fused = np.array([0.2 + 0.5, 0.1, 0.7 + 0.5, -0.1 + 0.5, 0.0 + 0.5, 0.3])
    np.testing.assert_allclose(c.columns["fused_reward"], fused)
    returns = np.array([fused[:3].sum(), fused[1:3].sum(), fused[2], fused[3:5].sum(), fused[4], fused[5]])
    np.testing.assert_allclose(c.returns, returns)
    g0 = returns[:5]
    np.testing.assert_allclose(c.advantages[:5], (g0 - g0.mean()) / (g0.std(ddof=1) + 1e-6))
    assert c.advantages[5] == 0.0  # singleton group
    gae_mode = assign_credit(b, "spa", gamma=0.9, lam=0.8)  # auto -> gae (value present)
    expect = reference_gae(fused[:3], [0.5, 1.0, 4.0], 0.9, 0.8)
    np.testing.assert_allclose(gae_mode.advantages[:3], expect)
    with pytest.raises(MissingColumnError, match="progress"):
        compute_advantages(b.with_columns(progress=None), "spa")
    with pytest.raises(MissingColumnError, match="value"):
        compute_advantages(b.with_columns(value=None), "spa", mode="gae")


def test_spa_whiten_standardizes_the_gae_advantages_and_keeps_the_returns():
    b = _batch()
    raw = assign_credit(b, "spa", gamma=0.9, lam=0.8, mode="gae")
    white = assign_credit(b, "spa", gamma=0.9, lam=0.8, mode="gae", whiten=True)
    np.testing.assert_allclose(white.returns, raw.returns)  # the critic's target is the raw GAE return
    expect = (raw.advantages - raw.advantages.mean()) / (raw.advantages.std(ddof=1) + 1e-6)
    np.testing.assert_allclose(white.advantages, expect)


def test_spa_grounding_pays_beta_per_executable_step_so_a_detour_outranks_the_short_path():
    # Eq. 8 of "SPA-RL: Reinforcing LLM Agents via Stepwise Progress Attribution" (arXiv:2505.20732),
    # r_t = alpha c_t + beta g_t, then GAE (eq. 10). Two winning paths from s0, every step executable (g = 1):
    # short s0 -> s1 -> goal, detour s0 -> s2 -> s1 -> goal. Progress is length-neutral (sum c = R, here the
    # potential differences of a critic that sees both win: 0 per step), so the fused returns are beta per step:
    # 2 beta and 3 beta from s0, beta from s1, 2 beta from s2. A critic fitted to them: V(s0) = 2.5 beta,
    # V(s1) = beta, V(s2) = 2 beta. With gamma = lambda = 1, A_t = G_t - V(s_t): the short path's first step
    # -0.5 beta, the detour's +0.5 beta.
    beta = 0.5
    b = StepBatch.from_trajectories([
        Trajectory(group=0, success=True, steps=[
            Step("s0", "a", "s1", 0.0, valid=True, value=2.5 * beta, progress=0.0),
            Step("s1", "b", "goal", 1.0, valid=True, value=beta, progress=0.0),
        ]),
        Trajectory(group=0, success=True, steps=[
            Step("s0", "x", "s2", 0.0, valid=True, value=2.5 * beta, progress=0.0),
            Step("s2", "y", "s1", 0.0, valid=True, value=2 * beta, progress=0.0),
            Step("s1", "b", "goal", 1.0, valid=True, value=beta, progress=0.0),
        ]),
    ])
    c = assign_credit(b, "spa", alpha=1.0, beta=beta, gamma=1.0, lam=1.0, mode="gae")
    np.testing.assert_allclose(c.columns["fused_reward"], [beta] * 5)
    np.testing.assert_allclose(c.advantages, [-0.5 * beta, 0.0, 0.5 * beta, 0.0, 0.0])
    # without the grounding term the two first steps tie (the progress is length-neutral)
    flat = assign_credit(b.with_columns(value=np.zeros(5)), "spa", alpha=1.0, beta=0.0, gamma=1.0, lam=1.0, mode="gae")
    np.testing.assert_allclose(flat.advantages, 0.0)
