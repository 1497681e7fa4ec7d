"""Forking members through the wrapper stack: the environment, the prompt history and the recorder's segments."""

from __future__ import annotations

import numpy as np
import pytest

import agentgym_credit  # noqa: F401
from agentgym_credit.baselines.rollout import make_group_env
from agentgym_credit.wrappers import branch_members, restore_members, snapshot_members
from agentgym_credit.wrappers.forking import StackSnapshot, stack_layers

ACT = "<think>go</think><action>{}</action>"


def _env(workers: int = 0):
    return make_group_env("Sokoban-Group-v0", 1, 3, max_steps=8, num_workers=workers)


def _start(env):
    """Reset member 0 only (1 and 2 stay without an episode) and play two steps."""
    obs, _ = env.reset(seed=4, options={"reset_mask": np.array([True, False, False])})
    for move in ("up", "left"):
        obs, *_ = env.step([ACT.format(move), "", ""])
    return obs


def _play(env, moves):
    """Step every live member with the same move each time; returns the last observations."""
    for move in moves:
        obs, *_ = env.step([ACT.format(move)] * 3)
    return obs


@pytest.mark.parametrize("workers", [0, 2])
def test_a_branch_sees_its_parents_prompt_and_records_a_segment_that_continues_its_step(workers):
    env = _env(workers)
    try:
        obs = _start(env)
        kids_obs, infos = branch_members(env, 0, [1, 2])
        assert kids_obs == [obs[0], obs[0]]  # the prompt, with the parent's history of two steps
        assert "Prior to this step, you have already taken 2 step(s)" in kids_obs[0]
        assert list(infos["_anchor"]) == [False, True, True]
        obs = _play(env, ["down", "right"])
        assert obs[0] == obs[1] == obs[2]  # the same moves from the same state: the same prompts
        while not env.unwrapped.finished.all():
            _play(env, ["up"])
        batch = env.pop_batch()
    finally:
        env.close()
    assert batch.is_tree and batch.num_leaves == 3
    parent = int(batch.traj[np.flatnonzero(batch.t == 0)[0]])
    first = [np.flatnonzero((batch.traj == k) & (batch.t == batch.t[batch.traj == k].min()))[0]
             for k in np.unique(batch.traj) if k != parent]
    assert [int(batch.t[r]) for r in first] == [2, 2] and [int(batch.parent[r]) for r in first] == [parent, parent]
    assert np.count_nonzero(batch.t < 2) == 2  # the shared prefix is stored once
    paths = batch.as_paths()
    assert len(set(paths.state)) < len(paths.state) and paths.num_trajectories == 3


def test_a_node_left_behind_restores_with_its_history_and_depth():
    env = _env()
    try:
        seen = _start(env)[0]
        node = snapshot_members(env, [0])[0]
        assert node.depth == 2 and node.group_id == 0
        _play(env, ["down", "down"])  # the parent moves on
        obs, _ = restore_members(env, [1], node)
        assert obs == [seen]
        assert env.recorder.cursor(1).depth == 2
        while not env.unwrapped.finished.all():
            _play(env, ["up"])
        batch = env.pop_batch()
    finally:
        env.close()
    child = np.flatnonzero(batch.traj == batch.traj.max())
    assert batch.t[child].min() == 2 and batch.is_tree


def test_a_fork_before_any_step_joins_the_parents_tree():
    env = _env()
    try:
        env.reset(seed=1, options={"reset_mask": np.array([True, False, False])})
        branch_members(env, 0, [1])
        while not env.unwrapped.finished.all():
            _play(env, ["up"])
        batch = env.pop_batch()
    finally:
        env.close()
    assert batch.is_tree and np.unique(batch.tree).size == 1 and np.count_nonzero(batch.t == 0) == 2


def test_forks_into_a_member_that_is_still_recording_are_refused_before_anything_changes():
    env = _env()
    try:
        env.reset(seed=2)
        env.step([ACT.format("up")] * 3)
        before = env.unwrapped.snapshot(2)
        with pytest.raises(ValueError, match="member 2 is playing a recorded episode"):
            branch_members(env, 0, [2])
        after = env.unwrapped.snapshot(2)
        assert (after.elapsed, after.observation) == (before.elapsed, before.observation)
        with pytest.raises(ValueError, match="episode is over|both the parent and a child"):
            branch_members(env, 0, [0])
    finally:
        env.close()


def test_a_snapshot_restores_only_into_its_own_stack():
    env, other = _env(), make_group_env("Sokoban-Group-v0", 1, 3, max_steps=8)
    try:
        _start(env)
        node = snapshot_members(env, [0])[0]
        with pytest.raises(ValueError, match="wrapper stack"):
            restore_members(other.env, [1], node)
        with pytest.raises(TypeError, match="StackSnapshot"):
            restore_members(env, [1], node.member)
        assert isinstance(node, StackSnapshot) and len(stack_layers(env)) == 4
    finally:
        env.close()
        other.close()


def test_a_fork_whose_other_child_lost_its_worker_still_records_and_prompts_the_child_it_restored():
    """Children 1 and 2 of one fork live in two workers; the worker of child 2 is dead. The branch raises, but
    child 1, which the env did restore, plays on with its parent's prompt and every step of it is recorded."""
    import os
    import signal

    env = make_group_env("Sokoban-Group-v0", 1, 4, max_steps=8, num_workers=2)  # members 0, 1 | 2, 3
    try:
        obs, _ = env.reset(seed=4, options={"reset_mask": np.array([True, False, False, False])})
        for move in ("up", "left"):
            obs, *_ = env.step([ACT.format(move), "", "", ""])
        os.kill(env.unwrapped._workers[1].process.pid, signal.SIGKILL)
        env.unwrapped._workers[1].process.join(5)
        with pytest.raises(RuntimeError, match="restore failed for 1 of 2 members"):
            branch_members(env, 0, [1, 2])
        assert env.unwrapped.finished.tolist() == [False, False, True, True]
        obs, *_ = env.step([ACT.format("down")] * 4)
        assert obs[1] == obs[0]  # the same move from the same state: the same prompt, history included
        while not env.unwrapped.finished.all():
            env.step([ACT.format("up")] * 4)
        batch = env.pop_batch()
    finally:
        env.close()
    assert batch.is_tree and batch.num_leaves == 2
    assert np.count_nonzero(batch.t < 2) == 2 and np.count_nonzero(batch.t >= 2) == 2 * (8 - 2)
