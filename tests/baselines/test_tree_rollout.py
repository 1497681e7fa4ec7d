"""Tree rollouts (``grow_trees``) on Sokoban and WebShop with scripted policies, in this process and in workers.

Every rollout must give a valid tree batch whose shared prefixes are stored once (one row per agent step
played), stay within its step budget, and hold as its root-to-leaf paths exactly the episodes the members
played: each path, replayed on a fresh member from its task's seed, gives the recorded states, rewards and end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import agentgym_credit  # noqa: F401
from agentgym_credit.baselines.rollout import (
    Rollout,
    episodes,
    make_group_env,
    mixed_outcome_groups,
    rollout_stats,
)
from agentgym_credit.baselines.tree_rollout import TreeSchedule, grow_trees
from agentgym_credit.credit import assign_credit
from agentgym_credit.envs.sokoban import EpsilonOraclePolicy
from agentgym_credit.envs.webshop.shopper import ScriptedShopper
from agentgym_credit.records import StepBatch
from agentgym_credit.wrappers import AttachCredit, RecordStepBatch

MAX_STEPS = 8
GROUPS, SLOTS = 2, 4


@dataclass
class Response:
    """A scripted response with the policy's entropy over its choice."""

    text: str
    entropy: float


def random_policy(seed: int):
    """Admissible actions drawn at random (WebShop: a search for words of the task), from the infos only, so the
    same calls give the same actions in this process and in workers; the entropy is the uniform choice's."""
    rng = np.random.default_rng(seed)

    def policy(obs: list[Any], members: list[int], infos: list[dict[str, Any]]) -> list[Response]:
        out = []
        for info in infos:
            choices = list(info.get("admissible_actions", ())) or ["up", "down", "left", "right"]
            action = str(choices[int(rng.integers(len(choices)))])
            if action == "search[...]":
                words = str(info.get("task", "")).split()
                action = f"search[{' '.join(words[3:7])}]"
            out.append(Response(action, float(np.log(len(choices))) + float(rng.random())))
        return out

    return policy


def oracle_policy(env: Any, env_id: str, epsilon: float, seed: int):
    """The environment's solver (Sokoban) or scripted shopper (WebShop), noisy with rate ``epsilon``; reads the
    members, so in this process only."""
    rng = np.random.default_rng(seed)
    members = env.unwrapped.members
    sokoban = EpsilonOraclePolicy(epsilon, seed=seed)

    def policy(obs: list[Any], ids: list[int], infos: list[dict[str, Any]]) -> list[str]:
        out = []
        for i, info in zip(ids, infos, strict=True):
            member = members[i].unwrapped
            if env_id.startswith("Sokoban"):
                out.append(sokoban.act(member))
                continue
            admissible = list(info.get("admissible_actions", ()))
            action = ScriptedShopper(member.goal).act(info, page=member.page)
            if rng.random() < epsilon and len(admissible) > 1:
                action = str(admissible[int(rng.integers(len(admissible)))])
                action = action if action != "search[...]" else f"search[{member.goal.name}]"
            out.append(action)
        return out

    return policy


def build(env_id: str, workers: int = 0) -> RecordStepBatch:
    vec = gym.make_vec(env_id, num_envs=GROUPS * SLOTS, group_size=SLOTS, vectorization_mode="vector_entry_point",
                       max_steps=MAX_STEPS, num_workers=workers)
    return RecordStepBatch(vec)


def replay_paths(env_id: str, batch: StepBatch, seed: int) -> None:
    """Each root-to-leaf path, replayed from its task's reset on a fresh member, is what the batch recorded."""
    member = gym.make(env_id, max_steps=MAX_STEPS).unwrapped
    paths = batch.tree_paths()
    first_group = int(batch.group.min())
    for p in range(paths.num_paths):
        rows = paths.rows[paths.starts[p]: paths.starts[p] + paths.lengths[p]]
        g = int(batch.group[rows[0]]) - first_group
        _, info = member.reset(seed=seed + g, options={"group_id": g})
        assert info["anchor"] == batch.state[rows[0]]
        for k, r in enumerate(rows):
            assert batch.t[r] == k
            _, reward, terminated, truncated, info = member.step(batch.action[r])
            assert info["anchor"] == batch.next_state[r]
            assert reward == pytest.approx(batch.reward[r])
            assert (terminated or truncated) == (k == len(rows) - 1)
        assert bool(info.get("won", False)) == bool(batch.success[rows[-1]])
    member.close()


def check_tree(batch: StepBatch, grown: Any, budget: int | None) -> None:
    """Valid tree, every step once, the budget kept."""
    assert batch.is_tree
    assert len(batch) == grown.stats["steps"] == len(grown.outputs)
    keys = set(zip(batch.traj.tolist(), batch.t.tolist(), strict=True))
    assert keys == set(grown.outputs)  # one row per step played, no copy
    assert batch.tree_paths().lengths.sum() > len(batch)  # prefixes shared by several episodes
    if budget is not None:
        assert np.bincount(batch.group - batch.group.min()).max() <= budget
    StepBatch(**batch.to_dict())  # validates again from the columns


@pytest.mark.parametrize("env_id", ["Sokoban-Group-v0", "WebShop-Group-v0"])
def test_fixed_schedule_with_an_oracle_gives_the_episodes_the_members_played(env_id):
    env = build(env_id)
    schedule = TreeSchedule(trees=2, expand=2, rounds=None, budget=5 * MAX_STEPS)
    try:
        grown = grow_trees(env, oracle_policy(env, env_id, 0.2, seed=1), schedule, seed=11)
        batch = env.pop_batch()
    finally:
        env.close()
    check_tree(batch, grown, schedule.budget)
    replay_paths(env_id, batch, seed=11)
    assert batch.success.any()  # the oracle wins some
    assert grown.stats["rounds"] >= 1 and grown.stats["forks"] >= 1


def test_fixed_schedule_without_a_budget_grows_one_plus_l_n_leaves_per_tree():
    env = build("Sokoban-Group-v0")
    schedule = TreeSchedule(trees=2, expand=2, rounds=2)
    try:
        grown = grow_trees(env, random_policy(3), schedule, seed=5)
        batch = env.pop_batch()
    finally:
        env.close()
    check_tree(batch, grown, None)
    leaves = np.bincount(batch.tree[batch.done])
    assert sorted(leaves[leaves > 0].tolist()) == [1 + 2 * 2] * (GROUPS * 2)
    assert np.unique(batch.tree).size == GROUPS * 2
    replay_paths("Sokoban-Group-v0", batch, seed=5)


@pytest.mark.parametrize("env_id", ["Sokoban-Group-v0", "WebShop-Group-v0"])
@pytest.mark.parametrize("schedule", [TreeSchedule(trees=2, expand=2, rounds=None, budget=4 * MAX_STEPS),
                                      TreeSchedule(schedule="entropy", trees=2, margin=0.2, children=2,
                                                   budget=4 * MAX_STEPS)], ids=["fixed", "entropy"])
def test_the_same_trees_in_this_process_and_in_workers(env_id, schedule):
    batches = []
    for workers in (0, 2):
        env = build(env_id, workers)
        try:
            grown = grow_trees(env, random_policy(7), schedule, seed=21)
            batches.append((env.pop_batch(), grown))
        finally:
            env.close()
    (here, grown), (there, _) = batches
    check_tree(here, grown, schedule.budget)
    for name, column in here.to_dict().items():
        other = there.to_dict()[name]
        assert list(column) == list(other), name
    replay_paths(env_id, here, seed=21)
    assert here.entropy is not None  # every response had one: recorded


def test_entropy_schedule_forks_the_uncertain_steps_before_they_are_played():
    env = build("Sokoban-Group-v0")
    calls: list[list[int]] = []

    def policy(obs, members, infos):
        calls.append(list(members))
        # member 0's second response is very uncertain, every other one is not
        return [Response("up", 5.0 if (i == 0 and len(calls) == 2) else 0.1) for i in members]

    try:
        grown = grow_trees(env, policy, TreeSchedule(schedule="entropy", trees=2, margin=1.0, children=2), seed=0)
        batch = env.pop_batch()
    finally:
        env.close()
    roots = [0, 1, SLOTS, SLOTS + 1]
    assert calls[:3] == [roots, roots, [2, 3]]  # the forks answer in the state member 0 was uncertain in
    assert grown.stats["forks"] == 1 and grown.stats["forked_members"] == 2
    second = np.flatnonzero((batch.t == 1) & (batch.group == batch.group.min()))
    assert len(second) == 4 and np.unique(batch.tree[second]).size == 2  # the forks are in member 0's tree
    forked = second[batch.parent[second] != batch.traj[second]]
    assert len(forked) == 2 and len(set(batch.state[r] for r in forked)) == 1
    check_tree(batch, grown, None)


def test_attach_credit_credits_a_tree_group_once_it_is_grown():
    vec = gym.make_vec("Sokoban-Group-v0", num_envs=GROUPS * SLOTS, group_size=SLOTS,
                       vectorization_mode="vector_entry_point", max_steps=MAX_STEPS)
    env = AttachCredit(vec, "tree_grpo")
    early: list[int] = []
    policy = random_policy(2)

    def watching(obs, members, infos):  # a group still playing has not been credited
        credited, _ = env.credit_batch()
        early.extend(i for i in members if env.recorder.member_group[i] in set(credited.group.tolist()))
        return policy(obs, members, infos)

    try:
        grow_trees(env, watching, TreeSchedule(trees=2, expand=1, rounds=2), seed=3)
        batch, advantages = env.pop_credit()
    finally:
        env.close()
    assert not early  # between rounds every member had finished, but no group was credited before it was grown
    assert batch.is_tree and batch.num_groups == GROUPS
    expected = assign_credit(batch, "tree_grpo").advantages
    np.testing.assert_allclose(advantages, expected)


def test_tree_rollout_statistics_count_the_leaves():
    env = build("Sokoban-Group-v0")
    try:
        grown = grow_trees(env, oracle_policy(env, "Sokoban-Group-v0", 0.5, 4), TreeSchedule(rounds=1), seed=8)
        batch = env.pop_batch()
    finally:
        env.close()
    paths = episodes(batch)
    assert paths.num_trajectories == batch.num_leaves
    n = len(batch)
    stats = rollout_stats(Rollout(batch, [[]] * n, [[1]] * n, [np.zeros(1)] * n, [""] * n), 1.0)
    assert stats["success_rate"] == pytest.approx(batch.success[batch.done].mean())
    assert stats["mean_steps"] == pytest.approx(batch.tree_paths().lengths.mean())
    assert stats["steps"] == len(batch) == grown.stats["steps"]
    wins = {g: batch.success[batch.done & (batch.group == g)] for g in np.unique(batch.group)}
    mixed = sorted(g for g, w in wins.items() if w.any() and not w.all())
    assert mixed_outcome_groups(batch).tolist() == mixed


@pytest.mark.parametrize(("schedule", "message"), [
    (TreeSchedule(trees=5), "exceeds the group's 4 members"),
    (TreeSchedule(trees=2, budget=2 * MAX_STEPS - 1), "cannot cover the 2 first chains"),
    (TreeSchedule(rounds=None), "needs rounds or a budget"),
    (TreeSchedule(schedule="beam"), "schedule must be one of"),
    (TreeSchedule(expand=0), "expand must be an integer >= 1"),
])
def test_bad_schedules_are_refused_before_any_reset(schedule, message):
    env = build("Sokoban-Group-v0")
    try:
        with pytest.raises(ValueError, match=message):
            grow_trees(env, random_policy(0), schedule, seed=0)
        assert env.unwrapped.finished.all() and not env.recorder.open_members()
    finally:
        env.close()


def test_the_entropy_schedule_needs_entropies_and_the_recorder_outermost():
    env = build("Sokoban-Group-v0")
    try:
        with pytest.raises(ValueError, match="needs each response's entropy"):
            grow_trees(env, lambda obs, members, infos: ["up"] * len(members), TreeSchedule(schedule="entropy"),
                       seed=0)
        grow_trees(env, random_policy(0), TreeSchedule(), seed=0)  # the aborted groups were let go
        assert env.pop_batch().is_tree
        with pytest.raises(ValueError, match="RecordStepBatch"):
            grow_trees(env.env, random_policy(0), TreeSchedule(), seed=0)
    finally:
        env.close()


def test_the_prompted_stack_gives_forks_the_prompt_of_their_node():
    env = make_group_env("Sokoban-Group-v0", 1, 4, max_steps=MAX_STEPS)
    seen: dict[tuple[int, int], str] = {}
    rng = np.random.default_rng(0)

    def policy(obs, members, infos):
        for o, i in zip(obs, members, strict=True):
            seen[(env.recorder.member_traj[i], env.recorder.cursor(i).depth)] = o
        return [f"<think>go</think><action>{rng.choice(['up', 'left'])}</action>" for _ in members]

    try:
        grown = grow_trees(env, policy, TreeSchedule(trees=1, expand=3, rounds=1), seed=2)
        batch = env.pop_batch()
    finally:
        env.close()
    # a branch's first prompt is the prompt the step it continues was followed by on its parent's path
    paths = batch.tree_paths()
    prompt_at = {}
    for p in range(paths.num_paths):
        rows = paths.rows[paths.starts[p]: paths.starts[p] + paths.lengths[p]]
        for r in rows:
            key = (int(batch.traj[r]), int(batch.t[r]))
            prompt_at.setdefault((p, int(batch.t[r])), seen[key])
    for p in range(paths.num_paths):
        for q in range(paths.num_paths):
            rows_p = paths.rows[paths.starts[p]: paths.starts[p] + paths.lengths[p]]
            rows_q = paths.rows[paths.starts[q]: paths.starts[q] + paths.lengths[q]]
            shared = 0
            while shared < min(len(rows_p), len(rows_q)) and rows_p[shared] == rows_q[shared]:
                shared += 1
            if shared < min(len(rows_p), len(rows_q)):  # the first steps after the fork see the same prompt
                assert prompt_at[(p, shared)] == prompt_at[(q, shared)]
    assert len(grown.outputs) == len(batch)
