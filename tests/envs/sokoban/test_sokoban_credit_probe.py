"""Sokoban's credit probe on real rollouts: the ground truth is the solver's change of the optimal distance."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

import agentgym_credit  # noqa: F401  (registers the built-in families)
from agentgym_credit.baselines.tree_rollout import TreeSchedule, grow_trees
from agentgym_credit.envs.credit_probe import ProbeStep
from agentgym_credit.envs.sokoban import ACTIONS, parse_text
from agentgym_credit.envs.sokoban.credit_probe import PROBE, distance_truth, epsilon_oracle
from agentgym_credit.envs.sokoban.solver import SokobanSolver
from agentgym_credit.envs.spec import get_family
from agentgym_credit.wrappers import RecordStepBatch


def _rollout(epsilon: float, groups: int = 2, size: int = 3, seed: int = 0):
    vec = gym.make_vec("Sokoban-Group-v0", num_envs=groups * size, group_size=size,
                       vectorization_mode="vector_entry_point")
    rec = RecordStepBatch(vec, info_keys=PROBE.info_keys)
    try:
        grown = grow_trees(rec, epsilon_oracle(vec, epsilon, seed), TreeSchedule(trees=size, rounds=0), seed=seed)
        batch = rec.batch()
        extras = rec.recorder.extras(batch)
    finally:
        vec.close()
    responses = [grown.outputs[(int(tr), int(t))] for tr, t in zip(batch.traj, batch.t, strict=True)]
    return batch, extras, responses


def test_the_spec_declares_the_probe() -> None:
    assert get_family("sokoban").credit_probe is PROBE and PROBE.ground_truth is distance_truth


def test_the_ground_truth_is_the_solvers_distance_change() -> None:
    batch, extras, responses = _rollout(0.7)
    gt = distance_truth(batch, extras, responses)
    assert gt.shape == (len(batch),) and all(isinstance(r, ProbeStep) and r.text in ACTIONS for r in responses)
    assert [r.text for r in responses] == list(batch.action)
    solvers: dict = {}
    for state, nxt, g in zip(batch.state, batch.next_state, gt, strict=True):
        before, after = parse_text(state), parse_text(nxt)
        solver = solvers.setdefault(before.room, SokobanSolver(before.room))
        d_before, d_after = solver.distance(before), solver.distance(after)
        if math.isinf(d_before):
            assert np.isnan(g)  # a step from a dead end is left out
        elif math.isinf(d_after):
            assert g == -2.0
        else:
            assert g == d_before - d_after
    finite = gt[np.isfinite(gt)]
    assert {1.0, -1.0} <= set(finite.tolist()) <= {1.0, 0.0, -1.0, -2.0}  # ε = 0.7 plays good and bad moves


def test_the_greedy_oracle_only_plays_optimal_moves_and_knows_its_entropy() -> None:
    batch, extras, responses = _rollout(0.0)
    assert np.all(distance_truth(batch, extras, responses) == 1.0) and batch.traj_success.all()
    # ε = 0: the entropy is that of the uniform choice among the optimal moves
    for state, r in zip(batch.state, responses, strict=True):
        board = parse_text(state)
        optimal = SokobanSolver(board.room).optimal_actions(board)
        assert abs(r.entropy - np.log(len(optimal))) < 1e-12
