from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentgym_credit  # noqa: F401
from agentgym_credit.credit import assign_credit, compute_advantages
from agentgym_credit.wrappers import AttachCredit, ParseActions, RecordStepBatch


def _vec(n=8, size=4):
    return gym.make_vec("Sokoban-Group-v0", num_envs=n, vectorization_mode="vector_entry_point", group_size=size)


def _responses(rng, n):
    out = []
    for _ in range(n):
        a = rng.choice(["up", "down", "left", "right"])
        out.append(f"<think>go</think><action>{a}</action>" if rng.random() > 0.2 else f"I will go {a}")
    return out


def _run(env, seed=0):
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    infos_seen = []
    while not env.unwrapped.finished.all():
        *_, info = env.step(_responses(rng, env.num_envs))
        infos_seen.append(info)
    return infos_seen


def test_recording_includes_invalid_steps_and_matches_env():
    env = RecordStepBatch(ParseActions(_vec()), include_penalty=False)
    _run(env)
    batch = env.batch()
    assert batch.num_trajectories == 8 and batch.num_groups == 2
    assert (~batch.valid).any() and batch.valid.any()
    assert set(batch.action) <= {"up", "down", "left", "right"} | {a for a in batch.action if a.startswith("i will")}
    # next_state of a row is the state of the following row
    o = batch.order
    same = batch.traj[o][1:] == batch.traj[o][:-1]
    assert [batch.next_state[i] for i in o[:-1][same]] == [batch.state[i] for i in o[1:][same]]
    # every trajectory of a group starts in the same state
    for part in batch.split_by_group().values():
        assert len({part.state[i] for i in np.flatnonzero(part.t == 0)}) == 1


def test_penalty_is_separate_unless_asked():
    plain = RecordStepBatch(ParseActions(_vec(), penalty=0.1))
    _run(plain, seed=2)
    row = RecordStepBatch(ParseActions(_vec(), penalty=0.1), include_penalty="row")
    _run(row, seed=2)
    ret = RecordStepBatch(ParseActions(_vec(), penalty=0.1), include_penalty=True)  # True means "return"
    _run(ret, seed=2)
    a, b, c = plain.batch(), row.batch(), ret.batch()
    assert a.action == b.action == c.action  # same seed, same rollout
    malformed = np.array([x.startswith("i will") for x in a.action])
    assert malformed.any()
    assert a.penalty is None and c.penalty is None
    np.testing.assert_array_equal(b.reward, a.reward)  # "row": the reward stays the env's
    np.testing.assert_allclose(b.penalty, 0.1 * malformed)
    np.testing.assert_allclose(c.reward, a.reward - 0.1 * malformed)  # "return": inside the reward


def test_unknown_penalty_mode_is_refused():
    with pytest.raises(ValueError, match="include_penalty"):
        RecordStepBatch(ParseActions(_vec()), include_penalty="trajectory")


def test_row_penalty_reaches_the_estimators_through_the_credit_wrapper():
    env = AttachCredit(ParseActions(_vec(), penalty=0.1), "grpo", include_penalty="row", convention="verl-agent")
    _run(env, seed=2)
    batch, adv = env.credit_batch()
    assert batch.penalty is not None and batch.penalty.any()
    # verl-agent: each row's score is its trajectory's env return less its own penalty, normalized over rows
    np.testing.assert_allclose(adv, compute_advantages(batch, "grpo", convention="verl-agent"))
    score = batch.episode_return - batch.penalty
    for g in np.unique(batch.group):
        rows = batch.group == g
        s = score[rows]
        expected = (s - s.mean()) / (s.std(ddof=1) + 1e-6) if np.ptp(s) > 0 else np.zeros_like(s)
        np.testing.assert_allclose(adv[rows], expected, atol=1e-12)


@pytest.mark.parametrize("name, params", [("gigpo", {}), ("graphgpo", {"omega": 0.8}), ("salt", {"h": 2}), ("grpo", {}),
                                          ("hgpo", {"history_length": 2, "base_group": True})])
def test_credit_wrapper_equals_compute_advantages(name, params):
    env = AttachCredit(ParseActions(_vec()), name, **params)
    infos = _run(env, seed=4)
    batch, adv = env.credit_batch()
    np.testing.assert_allclose(adv, compute_advantages(batch, name, **params))
    attached = [i for i in infos if "advantages" in i]
    assert attached and sum(int(i["_advantages"].sum()) for i in attached) == 8
    # the attached per-member arrays are that member's trajectory advantages in step order
    first = attached[0]
    m = int(np.flatnonzero(first["_advantages"])[0])
    assert len(first["advantages"][m]) >= 1


def test_unknown_estimator_or_parameter_fails_at_construction():
    from agentgym_credit.errors import UnknownEstimatorError

    with pytest.raises(UnknownEstimatorError, match="gipgo"):
        AttachCredit(_vec(2, 2), "gipgo")
    with pytest.raises(TypeError, match="omegaa"):
        AttachCredit(_vec(2, 2), "gigpo", omegaa=1.0)
    for name, fn in (("step_gae", "value_fn"), ("spa", "progress_fn")):
        with pytest.raises(ValueError, match=fn):
            AttachCredit(_vec(2, 2), name)
    with pytest.raises(TypeError, match="value_fn must be a callable"):
        AttachCredit(_vec(2, 2), "step_gae", value_fn=3.0)


def _value(batch):
    return np.array([len(s) % 7 / 7.0 for s in batch.state])


def _progress(batch):
    return np.where(batch.valid, 0.1, -0.1) * (batch.t + 1)


@pytest.mark.parametrize("name, params, fns", [
    ("step_gae", {"lam": 0.9}, {"value_fn": _value}),
    ("spa", {}, {"progress_fn": _progress}),
    ("spa", {"mode": "gae"}, {"progress_fn": _progress, "value_fn": _value}),
])
def test_value_and_progress_functions_make_every_estimator_work_through_the_wrapper(name, params, fns):
    env = AttachCredit(ParseActions(_vec()), name, **fns, **params)
    infos = _run(env, seed=5)
    batch, adv = env.credit_batch()
    columns = {"value" if k == "value_fn" else "progress": f(batch) for k, f in fns.items()}
    np.testing.assert_allclose(adv, compute_advantages(batch.with_columns(**columns), name, **params))
    assert sum(int(i["_advantages"].sum()) for i in infos if "advantages" in i) == 8
    assert np.any(adv != 0)


def test_value_fn_with_wrong_length_is_a_clear_error():
    env = AttachCredit(ParseActions(_vec(2, 2)), "step_gae", value_fn=lambda batch: np.zeros(1))
    with pytest.raises(ValueError, match="value_fn returned shape"):
        _run(env, seed=0)


def test_each_reset_releases_the_previous_rollout_and_pop_credit_hands_it_out_once():
    env = AttachCredit(ParseActions(_vec()), "grpo")
    _run(env, seed=1)
    first, adv1 = env.credit_batch()
    assert first.num_trajectories == 8
    _run(env, seed=2)  # the reset released rollout 1
    second, adv2 = env.credit_batch()
    assert second.num_trajectories == 8 and set(first.traj.tolist()).isdisjoint(second.traj.tolist())
    popped, adv = env.pop_credit()
    np.testing.assert_array_equal(adv, adv2)
    assert len(env.credit_batch()[0]) == 0 and len(env.pop_credit()[0]) == 0
    assert not env.recorder.closed_groups() and not env._advantages
    # held state stays bounded over many rollouts
    for seed in range(3, 8):
        _run(env, seed=seed)
    assert env.credit_batch()[0].num_trajectories == 8
    assert len(env._advantages) == 8 and len(env.recorder.closed_groups()) == 2 and len(env._credited) <= 2


def test_masked_reset_keeps_running_groups_and_credits_them_when_they_finish():
    from agentgym_credit.envs.group_vector import GroupVectorEnv

    env = AttachCredit(GroupVectorEnv("tests.envs.toy_envs:CounterEnv", 4, 2, max_steps=20), "grpo")
    env.reset(seed=0)
    actions = ["inc", "inc", "dec", "dec"]  # group 0 reaches its target, group 1 runs until truncation
    while not env.unwrapped.finished[:2].all():
        env.step(actions)
    assert not env.unwrapped.finished[2:].any()
    assert env.credit_batch()[0].num_trajectories == 2
    env.reset(options={"reset_mask": np.array([True, True, False, False])})
    assert env.credit_batch()[0].num_trajectories == 0  # group 0's rollout was released by the reset
    while not env.unwrapped.finished[2:].all():
        env.step(actions)
    batch, adv = env.pop_credit()  # group 1 (old) and group 2 (the reset members, finished again)
    assert batch.num_trajectories == 4 and set(batch.group.tolist()) == {1, 2}
    assert np.all(batch.traj >= 2)  # group 0's trajectories (ids 0, 1) are gone


def test_failed_reset_drops_the_unfinished_trajectories_it_ended():
    from agentgym_credit.envs.group_vector import GroupVectorEnv
    from agentgym_credit.errors import ResetError

    env = RecordStepBatch(GroupVectorEnv("tests.envs.toy_envs:CounterEnv", 4, 2, max_steps=20))
    env.reset(seed=0)
    env.step(["dec"] * 4)
    with pytest.raises(ResetError):
        env.reset(options={"fail": True})
    assert env.recorder.open_members() == [] and len(env.batch()) == 0
    env.reset(seed=1)
    env.step(["dec"] * 4)
    assert env.recorder.open_members() == [0, 1, 2, 3]


@pytest.mark.parametrize("take", ["pop_batch", "pop_credit", "credit_batch"])
def test_held_advantages_stay_bounded_however_the_rows_are_taken(take):
    from agentgym_credit.envs.group_vector import GroupVectorEnv

    env = AttachCredit(GroupVectorEnv("tests.envs.toy_envs:CounterEnv", 8, 4, max_steps=6), "grpo")
    rng = np.random.default_rng(0)
    most_held = 0
    for seed in range(300):
        env.reset(seed=seed)
        while not env.unwrapped.finished.all():
            env.step(list(rng.choice(["inc", "dec"], size=8)))
        batch = getattr(env, take)()
        assert (batch if take == "pop_batch" else batch[0]).num_trajectories == 8
        held_rows = {t.traj for t in env.recorder._closed}
        assert set(env._advantages) <= held_rows  # no advantages outlive their trajectory's rows
        most_held = max(most_held, len(env._advantages), len(held_rows))
    assert most_held == (8 if take == "credit_batch" else 0)  # one rollout at most, whatever the method


def _entropies(rng, n):
    return rng.gamma(2.0, 0.4, size=n)


def _run_with_entropy(env, seed=0):
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    given = []
    while not env.unwrapped.finished.all():
        running = ~env.unwrapped.finished.copy()
        entropy = _entropies(rng, env.num_envs)
        env.step(_responses(rng, env.num_envs), entropy=entropy)
        given.append((running, entropy))
    return given


def test_recorded_entropy_is_what_the_policy_passed_with_each_step():
    env = RecordStepBatch(ParseActions(_vec(4, 2)))
    given = _run_with_entropy(env, seed=1)
    batch = env.batch()
    assert batch.entropy is not None
    passed = sorted(float(e[i]) for running, e in given for i in np.flatnonzero(running))
    assert sorted(batch.entropy.tolist()) == passed
    plain = RecordStepBatch(ParseActions(_vec(4, 2)))
    _run(plain, seed=1)
    assert plain.batch().entropy is None


def test_empg_through_the_credit_wrapper():
    env = AttachCredit(ParseActions(_vec(4, 4)), "empg", base="gigpo", zeta=0.05)  # one group: one credit step
    _run_with_entropy(env, seed=6)
    batch, adv = env.credit_batch()
    assert batch.entropy is not None and np.any(adv != 0)
    np.testing.assert_allclose(adv, compute_advantages(batch, "empg", base="gigpo", zeta=0.05))
    # entropy_modulation makes any estimator need it too
    modulated = AttachCredit(ParseActions(_vec(4, 4)), "grpo", entropy_modulation={"k": 2.0})
    _run_with_entropy(modulated, seed=6)
    batch, adv = modulated.credit_batch()
    np.testing.assert_allclose(adv, compute_advantages(batch, "empg", base="grpo", k=2.0))


def test_missing_or_bad_entropy_is_refused_before_the_env_moves():
    env = AttachCredit(ParseActions(_vec(2, 2)), "empg")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="entropy=values"):
        env.step(_responses(rng, 2))
    with pytest.raises(ValueError, match="3 values for 2 members"):
        env.step(_responses(rng, 2), entropy=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="member 1.*finite and ≥ 0"):
        env.step(_responses(rng, 2), entropy=[0.1, -0.2])
    with pytest.raises(ValueError, match="member 0"):
        env.step(_responses(rng, 2), entropy=[float("nan"), 0.2])
    def recorded() -> int:
        return len(env.batch()) + sum(len(o.steps) for o in env.recorder._open.values())

    assert recorded() == 0  # nothing was stepped or recorded
    env.step(_responses(rng, 2), entropy=[0.1, 0.2])
    assert recorded() == 2


class _NoRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_actions_that_are_not_text_are_recorded_as_short_text_and_lose_no_row():
    """An action whose ``repr`` raises, or is megabytes long, is recorded like every other invalid step: the
    env's short stand-in text (at most 200 characters), and the rows of the other members of that step are
    kept (a raising ``repr`` once stopped the recording half-way through the step)."""
    env = RecordStepBatch(_vec(n=4, size=2))
    env.reset(seed=0)
    env.step([_NoRepr(), list(range(10**6)), b"up", "up"])
    while not env.unwrapped.finished.all():
        env.step(["still"] * 4)
    batch = env.batch()
    first = {int(batch.traj[i]): (batch.action[i], bool(batch.valid[i])) for i in np.flatnonzero(batch.t == 0)}
    assert sorted(first) == [0, 1, 2, 3]
    assert first[0] == ("<_NoRepr with failing repr: RuntimeError>", False)
    assert first[1][0].startswith("[0, 1, 2") and len(first[1][0]) == 200 and not first[1][1]
    assert first[2] == ("b'up'", False) and first[3] == ("up", True)


@pytest.mark.parametrize("request_kind", ["call", "apply", "snapshots"])
def test_a_worker_that_dies_outside_a_step_closes_its_recorded_trajectories_as_crashed(request_kind):
    """A worker killed while it answers ``call``, ``apply`` or ``snapshots`` ends its members' episodes; their
    recorded steps are closed as crashed (not left open for ever), so the group is credited and no row is lost."""
    import os
    import signal

    from agentgym_credit.envs.group_vector import GroupVectorEnv
    from tests.envs.toy_envs import value_plus

    env = AttachCredit(GroupVectorEnv("tests.envs.toy_envs:CounterEnv", num_envs=4, group_size=2, num_workers=2,
                                      max_steps=3), "grpo")
    try:
        env.reset(seed=3, options={"start": 0})  # targets are >= 5: nobody wins within 3 steps
        env.step(["inc"] * 4)
        os.kill(env.unwrapped._workers[1].process.pid, signal.SIGKILL)  # members 2 and 3
        env.unwrapped._workers[1].process.join(5)
        with pytest.raises(RuntimeError, match="died"):
            if request_kind == "call":
                env.unwrapped.call("max_steps")
            elif request_kind == "apply":
                env.unwrapped.apply(value_plus, {2: (1,)})
            else:
                env.unwrapped.snapshots([2])
        assert env.unwrapped.crashed.tolist() == [False, False, True, True]
        # nothing more to step for the lost members: their rows are in the batch already
        batch = env.batch()
        assert sorted(batch.traj[batch.crashed].tolist()) == [2, 3] and len(batch) == 2
        while not env.unwrapped.finished.all():
            env.step(["dec"] * 4)
        batch, adv = env.credit_batch()
        assert batch.num_trajectories == 4 and env.recorder.open_members() == []
        assert batch.traj_crashed.tolist() == [False, False, True, True]
        np.testing.assert_array_equal(adv, assign_credit(batch, "grpo").advantages)
    finally:
        env.close()
