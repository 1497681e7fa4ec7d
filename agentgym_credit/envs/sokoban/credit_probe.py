"""Sokoban's credit probe: the exact solver's ground truth for the credit-quality benchmark (``agc run``).

Groups of ``Sokoban-Group-v0`` (6×6, 1 box) are rolled out by each member's ε-noisy solver
(:func:`epsilon_oracle`). The environment pays its default reward, gym-sokoban's shaped reward as in the
papers' code (−0.1 per step, ±1 for a box onto / off a target, +10 when solved); ``--reward sparse`` pays only
10 × solved, the setting of the benchmark's results before the environment followed the papers' code. With
shaped rewards, returns also differ by episode length, so trajectory-level estimators (GRPO, RLOO) get a signal
from shorter solutions that the sparse reward does not give them.

The ground truth of a step (:func:`distance_truth`) is ``gt = d(s) − d(s')`` with ``d`` the solver's optimal
number of moves to solve: a move that shortens the optimal distance is good, +1; a bump into a wall is neutral,
0; one that lengthens it is bad, −1; one into a dead end is worst, −2. Steps taken from a dead end
(``d(s) = ∞``) are left out (NaN).

The oracle's entropy is that of its action distribution at the state,
:math:`\\pi(a \\mid s) = (1 - \\varepsilon)\\, q(a \\mid s) + \\varepsilon / 4` with :math:`q` uniform over the
solver's optimal moves (all four in a dead end), so a state with several optimal moves is less certain.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentgym_credit.envs.credit_probe import CreditProbe, ProbePolicy, ProbeStep, noisy_entropy
from agentgym_credit.envs.sokoban.oracle import EpsilonOraclePolicy
from agentgym_credit.envs.sokoban.rewards import REWARD_MODES
from agentgym_credit.envs.sokoban.state import ACTIONS
from agentgym_credit.records import StepBatch

__all__ = ["PROBE", "distance_truth", "epsilon_oracle"]


def epsilon_oracle(env: Any, epsilon: float, seed: int) -> ProbePolicy:
    """Each member's ε-noisy solver (:class:`~agentgym_credit.envs.sokoban.oracle.EpsilonOraclePolicy`, seeded
    ``seed · 100003 + member``) as a rollout policy; the entropy is that of its action distribution, ε/4 on
    every move plus (1 − ε) spread over the optimal ones (:func:`~agentgym_credit.envs.credit_probe.noisy_entropy`).

    Args:
        env: the ``Sokoban-Group-v0`` vector env (its ``unwrapped.members``).
        epsilon: the probability of a uniformly random move.
        seed: seeds the members' policies.
    """
    members = env.unwrapped.members
    policies = [EpsilonOraclePolicy(epsilon, seed=seed * 100_003 + i) for i in range(env.num_envs)]

    def policy(obs: list[Any], ids: list[int], infos: list[dict[str, Any]]) -> list[ProbeStep]:
        out = []
        for i in ids:
            member = members[i].unwrapped
            optimal = member.solver.optimal_actions(member.room_state) or list(ACTIONS)
            out.append(ProbeStep(policies[i].act(member), noisy_entropy(epsilon, optimal, list(ACTIONS))))
        return out

    return policy


def distance_truth(batch: StepBatch, extras: Mapping[str, np.ndarray], responses: Sequence[ProbeStep]) -> np.ndarray:
    """``d(s) − d(s')`` per row from the recorded optimal distances (``optimal_distance_before`` and
    ``optimal_distance``); −2 into a dead end (``d(s') = ∞``), NaN from one (``d(s) = ∞``)."""
    d_before = np.asarray(extras["optimal_distance_before"], dtype=float)
    d_after = np.asarray(extras["optimal_distance"], dtype=float)
    with np.errstate(invalid="ignore"):
        gt = np.where(np.isinf(d_after), -2.0, d_before - d_after)
    gt[np.isinf(d_before)] = np.nan
    return gt


def _add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--reward", choices=list(REWARD_MODES), default="shaped",
                       help="Sokoban reward: gym-sokoban's shaped reward (the papers' code) or 10 × solved.")


def _env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"reward": args.reward}


def _setting(env_kwargs: Mapping[str, Any]) -> str:
    return f"6×6, 1 box, {env_kwargs.get('reward', 'shaped')} reward"


def _variant(env_kwargs: Mapping[str, Any]) -> str:
    reward = env_kwargs.get("reward", "shaped")
    return "" if reward == "shaped" else reward


PROBE = CreditProbe(
    policy=epsilon_oracle,
    truth="the solver's moves-to-solved before minus after the move; -2 into a dead end",
    setting=_setting,
    ground_truth=distance_truth,
    info_keys=("optimal_distance",),
    add_arguments=_add_arguments,
    env_kwargs=_env_kwargs,
    variant=_variant,
)
"""Sokoban's credit probe (``EnvFamilySpec.credit_probe``)."""
