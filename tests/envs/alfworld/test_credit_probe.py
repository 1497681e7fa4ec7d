"""ALFWorld's credit probe on real rollouts of shipped games: +1 for the planner's next command, −1 otherwise."""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import pytest

from agentgym_credit.baselines.tree_rollout import TreeSchedule, grow_trees
from agentgym_credit.envs.alfworld.credit_probe import PROBE, epsilon_oracle
from agentgym_credit.envs.credit_probe import noisy_entropy, response_truth
from agentgym_credit.envs.spec import get_family
from agentgym_credit.wrappers import RecordStepBatch


def _rollout(epsilon: float, size: int = 2, seed: int = 0):
    """One pick-and-place game played by ``size`` members; each response with the planner's command and the
    admissible commands of its state, read before the oracle answered."""
    vec = gym.make_vec("ALFWorld-Group-v0", num_envs=size, group_size=size, vectorization_mode="vector_entry_point",
                       max_steps=8, task_types=["pick_and_place_simple"])
    rec = RecordStepBatch(vec, info_keys=PROBE.info_keys)
    members = vec.unwrapped.members
    oracle = epsilon_oracle(vec, epsilon, seed)
    seen = []

    def policy(obs, ids, infos):
        expert = [members[i].unwrapped.expert_next_action() for i in ids]
        out = oracle(obs, ids, infos)
        seen.extend(zip(out, expert, [list(info["admissible_actions"]) for info in infos], strict=True))
        return out

    try:
        grown = grow_trees(rec, policy, TreeSchedule(trees=size, rounds=0), seed=seed)
        batch = rec.batch()
        extras = rec.recorder.extras(batch)
    finally:
        vec.close()
    responses = [grown.outputs[(int(tr), int(t))] for tr, t in zip(batch.traj, batch.t, strict=True)]
    return batch, extras, responses, seen


def test_the_spec_declares_the_probe() -> None:
    assert get_family("alfworld").credit_probe is PROBE and PROBE.ground_truth is response_truth


def test_the_ground_truth_is_whether_the_planner_would_have_played_the_command() -> None:
    batch, extras, responses, seen = _rollout(0.6)
    assert [r.text for r in responses] == list(batch.action)
    for response, expert, admissible in seen:
        assert response.gt == (1.0 if response.text == expert else -1.0)
        assert response.entropy == pytest.approx(noisy_entropy(0.6, [expert], admissible))
    gt = PROBE.ground_truth(batch, extras, responses)
    assert gt.shape == (len(batch),) and set(gt.tolist()) == {1.0, -1.0}  # ε = 0.6 plays both


def test_the_greedy_planner_wins_with_every_step_good() -> None:
    batch, extras, responses, _ = _rollout(0.0)
    assert np.all(PROBE.ground_truth(batch, extras, responses) == 1.0) and batch.traj_success.all()


def test_the_options_become_env_kwargs() -> None:
    args = argparse.Namespace(max_steps=12, task_types=["1", "look_at_obj_in_light"])
    kwargs = PROBE.env_kwargs(args)
    assert kwargs == {"max_steps": 12, "task_types": ["pick_and_place_simple", "look_at_obj_in_light"]}
    assert PROBE.setting(kwargs) == "shipped train games: pick_and_place_simple, look_at_obj_in_light"
    with pytest.raises(ValueError, match="--task-types: unknown task type 'cook'"):
        PROBE.env_kwargs(argparse.Namespace(max_steps=12, task_types=["cook"]))
