from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import agentgym_credit  # noqa: F401
from agentgym_credit.envs.group_vector import GroupVectorEnv
from agentgym_credit.errors import EnvClosedError
from agentgym_credit.wrappers.recording import member_info

TOY = "tests.envs.toy_envs:CounterEnv"


def _play(env: GroupVectorEnv, script: list[list[str]]):
    out = []
    obs, info = env.reset(seed=7)
    out.append(obs)
    for actions in script:
        obs, rew, term, trunc, info = env.step(actions)
        out.append((obs, rew.tolist(), term.tolist(), trunc.tolist(), info["active"].tolist()))
    return out


def test_groups_start_identical_and_differ_between_groups():
    env = GroupVectorEnv(TOY, num_envs=12, group_size=4)
    obs, info = env.reset(seed=1)
    for g in range(3):
        assert len(set(obs[g * 4:(g + 1) * 4])) == 1
    assert info["group_id"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert env.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    obs2, _ = env.reset(seed=1)
    assert obs2 == obs


def test_finished_members_stay_finished_until_reset_mask():
    env = GroupVectorEnv(TOY, num_envs=2, group_size=2, max_steps=2)
    env.reset(seed=0)
    env.step(["inc", "bad"])
    obs, rew, term, trunc, info = env.step(["inc", "bad"])
    assert trunc.all() or term.all() or (term | trunc).all()
    obs3, rew3, term3, trunc3, info3 = env.step(["inc", "inc"])
    assert obs3 == obs and rew3.tolist() == [0.0, 0.0] and not info3["active"].any()
    obs4, _ = env.reset(options={"reset_mask": np.array([True, False])})
    assert not env.finished[0] and env.finished[1]


def test_in_process_and_workers_give_same_results():
    script = [["inc", "dec", "inc", "x"] * 2 for _ in range(5)]
    a = _play(GroupVectorEnv(TOY, num_envs=8, group_size=4), script)
    w = GroupVectorEnv(TOY, num_envs=8, group_size=4, num_workers=2)
    try:
        b = _play(w, script)
    finally:
        w.close()
    assert a == b


def test_worker_crash_is_reported_and_replaced():
    env = GroupVectorEnv(TOY, num_envs=4, group_size=2, num_workers=2, worker_timeout=30)
    try:
        env.reset(seed=3)
        obs, rew, term, trunc, info = env.step(["inc", "inc", "crash", "inc"])
        assert trunc[2] and trunc[3] and info["crashed"][2]
        assert "died and was replaced" in info["worker_error"][2]
        assert not info["_crashed"][0] and not trunc[0]  # the other worker's members continue
        assert env.worker_restarts == 1
        env.step(["inc", "inc", "inc", "inc"])  # survivors keep playing
        obs, info = env.reset(seed=3)  # the replacement works
        assert len(set(obs[2:4])) == 1
    finally:
        env.close()


def test_member_exception_is_a_truncated_step_not_a_crash():
    env = GroupVectorEnv(TOY, num_envs=2, group_size=2)
    env.reset(seed=0)
    obs, rew, term, trunc, info = env.step(["raise", "inc"])
    assert trunc[0] and not trunc[1] and "member bug" in info["error"][0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="multiple of group_size"):
        GroupVectorEnv(TOY, num_envs=5, group_size=2)
    env = GroupVectorEnv(TOY, num_envs=2, group_size=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="expected 2 actions"):
        env.step(["inc"])


@pytest.mark.parametrize("kwargs, message", [
    ({"group_size": "8"}, "group_size must be int, got str '8'; write group_size=8, without quotes"),
    ({"num_envs": "8"}, "num_envs must be int, got str '8'; write num_envs=8, without quotes"),
    ({"num_workers": 1.5}, "num_workers must be int, got float 1.5; pass an int"),
    ({"worker_timeout": "30"}, "worker_timeout must be float, got str '30'; write worker_timeout=30.0"),
    ({"seed": "1"}, "seed must be a non-negative int or None"),
    ({"max_steps": "5"}, "max_steps must be int, got str '5'; write max_steps=5, without quotes"),
    ({"max_stepz": 5}, "CounterEnv takes no argument 'max_stepz'; did you mean 'max_steps'?"),
])
def test_numeric_arguments_of_the_wrong_type_are_named(kwargs, message):
    """A config file's "8" is refused in one line naming the argument, not deep inside as "'<' not supported"."""
    args = {"num_envs": 8, "group_size": 4, **kwargs}
    with pytest.raises(TypeError) as caught:
        GroupVectorEnv(TOY, **args)
    assert message in str(caught.value) and "not supported" not in str(caught.value)


def test_make_vec_numeric_arguments_are_checked_before_any_member_is_built():
    with pytest.raises(TypeError, match="group_size must be int, got str '8'"):
        gym.make_vec("Sokoban-Group-v0", num_envs=8, group_size="8", vectorization_mode="vector_entry_point")
    with pytest.raises(TypeError, match="num_boxes must be int, got str '2'"):  # the members' too, with workers
        gym.make_vec("Sokoban-Group-v0", num_envs=2, num_boxes="2", num_workers=1,
                     vectorization_mode="vector_entry_point")


def test_group_options_give_each_group_its_own_task_in_one_reset():
    local, workers = _both()
    try:
        for env in (local, workers):
            plain = env.reset(seed=3)[0]
            obs, _ = env.reset(seed=3, options={"group_options": [{"start": 1}, {"start": 4}]})
            assert [o.split()[1] for o in obs] == ["1", "1", "4", "4"]  # members 0-1 are group 0, 2-3 group 1
            mask = np.array([False, False, True, True])  # group 0's entry is ignored: it is not reset
            obs, _ = env.reset(seed=3, options={"group_options": [{"start": 0}, None], "reset_mask": mask})
            assert obs == (obs[0], obs[0], plain[2], plain[3]) and obs[0].split()[1] == "1"
        with pytest.raises(ValueError, match="one entry per group"):
            local.reset(options={"group_options": [{"start": 1}]})
        with pytest.raises(TypeError, match="sequence of one mapping"):
            local.reset(options={"group_options": {"start": 1}})
        with pytest.raises(ValueError, match="cannot set reset_mask"):
            local.reset(options={"group_options": [{"group_id": 1}, None]})
    finally:
        workers.close()


def test_apply_runs_where_each_member_lives():
    from tests.envs.toy_envs import value_plus

    local, workers = _both()
    try:
        answers = []
        for env in (local, workers):
            env.reset(seed=5)
            answers.append(env.apply(value_plus, {0: (10,), 3: (20,)}))
            with pytest.raises(ValueError, match="k must be >= 0"):  # the member's own exception
                env.apply(value_plus, {2: (-1,)})
        assert answers[0] == answers[1] and set(answers[0]) == {0, 3}
        with pytest.raises(TypeError, match="picklable"):
            local.apply(lambda env: 0, {0: ()})
    finally:
        workers.close()


def test_workers_step_their_members_side_by_side():
    env = GroupVectorEnv(TOY, num_envs=2, group_size=1, num_workers=2)
    try:
        env.reset(seed=0)
        infos = env.step(["sleep", "sleep"])[4]
        (a0, a1), (b0, b1) = infos["slept"]
        assert a0 < b1 and b0 < a1  # the two workers' sleeps overlap: both were asked before either answered
    finally:
        env.close()


def test_make_vec_through_registration():
    env = gym.make_vec("Sokoban-Group-v0", num_envs=6, vectorization_mode="vector_entry_point", group_size=3)
    obs, info = env.reset(seed=5)
    assert isinstance(env.unwrapped, GroupVectorEnv) and env.num_envs == 6
    assert obs[0] == obs[1] == obs[2] and obs[3] == obs[4] == obs[5]
    assert set(info) >= {"anchor", "admissible_actions", "won", "task", "task_id", "group_id", "action_valid"}
    member = gym.make("Sokoban-Group-v0")
    o, i = member.reset(seed=5)
    assert o == obs[0]


# --------------------------------------------------------------- reliability (issue: failed resets, workers)
def _both(num_envs=4, group_size=2, **kw):
    """The same env in this process and with two worker processes."""
    return GroupVectorEnv(TOY, num_envs, group_size, **kw), GroupVectorEnv(TOY, num_envs, group_size, num_workers=2, **kw)


class _Local:
    def __str__(self) -> str:
        return "local"


def _clean(step_out):
    obs, rew, term, trunc, info = step_out
    keep = {k: v.tolist() for k, v in info.items() if k in ("action_valid", "error", "active", "crashed", "_crashed")}
    return obs, rew.tolist(), term.tolist(), trunc.tolist(), keep


def test_unpicklable_and_odd_actions_are_clean_invalid_steps_with_and_without_workers():
    local, workers = _both()
    try:
        outs = []
        for env in (local, workers):
            env.reset(seed=2)
            odd = [lambda: 0, _Local(), np.str_("inc"), object()]
            first = _clean(env.step(odd))
            second = _clean(env.step(["inc"] * 4))
            outs.append((first, second))
        assert outs[0] == outs[1]
        first, second = outs[0]
        assert first[4]["action_valid"] == [False, False, True, False]
        assert first[4]["error"][0] == "actions are text; got function (pass the command as a str)"
        assert workers.worker_restarts == 0
    finally:
        workers.close()


def test_actions_must_be_one_sequence_per_member():
    env = GroupVectorEnv(TOY, num_envs=3, group_size=1)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="sequence of 3 actions"):
        env.step("inc")
    with pytest.raises(TypeError, match="sequence of 3 actions"):
        env.step(5)


def test_unpicklable_info_is_reported_for_that_member_and_the_worker_lives():
    env = GroupVectorEnv(TOY, num_envs=4, group_size=2, num_workers=2)
    try:
        env.reset(seed=1)
        obs, rew, term, trunc, info = env.step(["unpicklable", "inc", "inc", "inc"])
        assert env.worker_restarts == 0 and not trunc.any()
        assert info["unpicklable_info"][0] == ["callback"] and not info["_unpicklable_info"][1]
        assert info["callback"][0].startswith("<function")
        assert "crashed" not in info
        env.step(["inc"] * 4)  # the member's episode goes on
        assert env.worker_restarts == 0
    finally:
        env.close()


def test_call_of_missing_attribute_raises_attribute_error_and_keeps_workers():
    local, workers = _both()
    try:
        for env in (local, workers):
            env.reset(seed=0)
            with pytest.raises(AttributeError, match="no_such_attribute"):
                env.call("no_such_attribute")
            assert env.call("max_steps") == (6, 6, 6, 6)
            assert env.call("elapsed_steps") == (0, 0, 0, 0)
        assert workers.worker_restarts == 0
    finally:
        workers.close()


def test_failing_member_reset_raises_reset_error_the_same_with_and_without_workers():
    from agentgym_credit.errors import ResetError, ResetNeeded

    local, workers = _both()
    try:
        for env in (local, workers):
            env.reset(seed=0)
            with pytest.raises(ResetError, match="reset asked to fail") as exc:
                env.reset(options={"fail": True})
            assert sorted(exc.value.errors) == [0, 1, 2, 3]
            assert env.finished.all()
            with pytest.raises(ResetNeeded):  # the old episodes are not continued
                env.step(["inc"] * 4)
            obs, _ = env.reset(seed=0)  # a good reset works again
            assert len(obs) == 4 and not env.finished.any()
        assert workers.worker_restarts == 0
    finally:
        workers.close()


def test_step_before_reset_and_use_after_close_raise_clear_errors():
    from agentgym_credit.errors import EnvClosedError, ResetNeeded

    env = GroupVectorEnv(TOY, num_envs=2, group_size=1)
    with pytest.raises(ResetNeeded, match="call reset"):
        env.step(["inc", "inc"])
    env.close()
    for call in (lambda: env.reset(seed=0), lambda: env.step(["inc", "inc"]), lambda: env.call("value")):
        with pytest.raises(EnvClosedError):
            call()


def test_seeds_numpy_integers_accepted_and_bad_seeds_refused():
    env = GroupVectorEnv(TOY, num_envs=4, group_size=2)
    a, _ = env.reset(seed=np.int64(5))
    b, _ = env.reset(seed=5)
    c, _ = env.reset(seed=[np.int32(5), 6])
    assert a == b == c
    for bad, err in ((1.5, TypeError), ("5", TypeError), (-1, ValueError), ([1], ValueError), (True, TypeError)):
        with pytest.raises(err):
            env.reset(seed=bad)
    with pytest.raises(TypeError, match="options must be a dict"):
        env.reset(options=["x"])
    with pytest.raises(TypeError, match="picklable"):
        env.reset(options={"x": lambda: 0})
    with pytest.raises(TypeError, match="reset_mask"):
        env.reset(options={"reset_mask": np.array(["a", "b", "c", "d"])})


def test_killed_worker_then_reset_gives_live_members_and_crashed_trajectory_gets_no_credit():
    import os
    import signal

    from agentgym_credit.wrappers import AttachCredit

    env = AttachCredit(GroupVectorEnv(TOY, num_envs=4, group_size=2, num_workers=2, max_steps=3), "grpo")
    try:
        env.reset(seed=3)
        env.step(["inc"] * 4)
        os.kill(env.unwrapped._workers[1].process.pid, signal.SIGKILL)  # members 2 and 3
        env.unwrapped._workers[1].process.join(5)
        obs, rew, term, trunc, info = env.step(["dec", "dec", "inc", "inc"])
        assert info["crashed"][2] and info["crashed"][3] and trunc[2] and trunc[3]
        while not env.unwrapped.finished.all():
            env.step(["dec"] * 4)
        batch, adv = env.credit_batch()
        assert batch.traj_crashed.tolist() == [False, False, True, True]
        assert np.all(adv[batch.crashed] == 0.0)
        # a reset after the crash gives every member a live episode
        os.kill(env.unwrapped._workers[0].process.pid, signal.SIGKILL)
        env.unwrapped._workers[0].process.join(5)
        obs, info = env.reset(seed=4)
        assert not env.unwrapped.finished.any() and env.unwrapped.worker_restarts == 2
        assert env.recorder.open_members() == [0, 1, 2, 3]
        assert len(env.credit_batch()[0]) == 0  # the previous rollout was released
    finally:
        env.close()


def test_killed_worker_during_masked_reset_closes_the_lost_trajectories_as_crashed():
    import os
    import signal

    from agentgym_credit.wrappers import RecordStepBatch

    env = RecordStepBatch(GroupVectorEnv(TOY, num_envs=4, group_size=2, num_workers=1, max_steps=4))
    try:
        env.reset(seed=3)
        env.step(["inc"] * 4)
        os.kill(env.unwrapped._workers[0].process.pid, signal.SIGKILL)
        env.unwrapped._workers[0].process.join(5)
        env.reset(options={"reset_mask": np.array([True, True, False, False])})
        batch = env.batch()
        assert set(batch.traj[batch.crashed].tolist()) == {2, 3}  # members 2, 3 lost their episodes
        assert env.unwrapped.finished.tolist() == [False, False, True, True]
        assert env.recorder.open_members() == [0, 1]
    finally:
        env.close()


def test_worker_that_cannot_build_its_members_fails_at_construction():
    from agentgym_credit.errors import WorkerStartError

    with pytest.raises(WorkerStartError, match="max_steps must be positive"):  # the constructor itself raises
        GroupVectorEnv(TOY, num_envs=2, group_size=1, num_workers=1, max_steps=0)
    with pytest.raises(TypeError, match="no_such_kwarg"):  # an argument it does not take: refused before any worker
        GroupVectorEnv(TOY, num_envs=2, group_size=1, num_workers=1, no_such_kwarg=1)


def test_script_without_main_guard_under_spawn_fails_at_construction(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "no_guard.py"
    script.write_text(
        "from agentgym_credit.envs.group_vector import GroupVectorEnv\n"
        f"env = GroupVectorEnv({TOY!r}, num_envs=2, group_size=1, num_workers=1, worker_timeout=60)\n"
        "print('built', env.reset(seed=0)[0])\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode != 0 and "built" not in proc.stdout
    assert "WorkerStartError" in proc.stderr and "__main__" in proc.stderr


# ------------------------------------------------------------------------------------------------- branch
def _branch_transcript(env: GroupVectorEnv) -> list:
    """Reset, diverge, branch member 1 into 3 and 0, then step: member 1 and child 3 get the same actions
    after the branch, child 0 others."""
    out: list = []
    env.reset(seed=3)
    for actions in (["inc", "dec", "inc", "dec", "inc", "inc", "dec", "dec"],
                    ["dec", "inc", "x", "inc", "inc", "x", "dec", "dec"]):
        step = env.step(actions)
        out.append((step[0], *(a.tolist() for a in step[1:4])))
    parent_obs, parent_info = env._obs[1], dict(env._infos[1])
    obs, infos = env.branch(1, [3, 0])
    assert obs == [parent_obs, parent_obs]
    assert infos["_anchor"].tolist() == [True, False, False, True, False, False, False, False]
    for child in (3, 0):
        assert member_info(infos, child) == parent_info
    assert not env.finished[[0, 1, 3]].any()
    out.append((obs, {k: v.tolist() for k, v in infos.items()}))
    for actions in (["dec", "inc", "inc", "inc"], ["dec", "inc", "dec", "inc"], ["x", "dec", "inc", "dec"]):
        step = env.step(actions + ["inc"] * 4)
        obs, rew, term, trunc, info = step
        assert (obs[3], rew[3], term[3], trunc[3], member_info(info, 3)) == (
            obs[1], rew[1], term[1], trunc[1], member_info(info, 1))
        out.append((step[0], *(a.tolist() for a in step[1:4]), info["anchor"].tolist(), info["active"].tolist()))
    return out


def _reference_member(prefix: list[str], after: list[str]) -> list:
    """Member 1 of a fresh env (no branch) playing ``prefix`` then ``after``: its observation each step."""
    env = GroupVectorEnv(TOY, num_envs=8, group_size=4, max_steps=8)
    env.reset(seed=3)
    seen = []
    for a in prefix + after:
        seen.append(env.step(["inc", a] + ["inc"] * 6)[0][1])
    return seen[len(prefix):]


def test_branch_forks_a_member_the_same_in_process_and_across_workers():
    local = GroupVectorEnv(TOY, num_envs=8, group_size=4, max_steps=8)
    workers = GroupVectorEnv(TOY, num_envs=8, group_size=4, max_steps=8, num_workers=2)
    try:
        assert [(w.lo, w.hi) for w in workers._workers] == [(0, 4), (4, 8)]
        expected = _branch_transcript(local)
        assert _branch_transcript(workers) == expected
    finally:
        local.close()
        workers.close()
    # child 0 went its own way: what member 1 itself gives for the same actions from the same prefix
    assert [step[0][0] for step in expected[3:]] == _reference_member(["dec", "inc"], ["dec", "dec", "x"])


def test_branch_across_worker_processes_of_one_group():
    env = GroupVectorEnv(TOY, num_envs=4, group_size=4, max_steps=8, num_workers=2)
    try:
        assert [(w.lo, w.hi) for w in env._workers] == [(0, 2), (2, 4)]
        env.reset(seed=5)
        env.step(["inc", "dec", "inc", "dec"])
        obs, infos = env.branch(0, [2, 3, 1])  # children on both workers
        assert obs == [env._obs[0]] * 3 and infos["_anchor"].tolist() == [False, True, True, True]
        values = env.call("value")
        assert len(set(values)) == 1
        step = env.step(["inc", "dec", "inc", "inc"])
        assert step[0][0] == step[0][2] == step[0][3] != step[0][1]
        assert env.call("value") == (values[0] + 1, values[0] - 1, values[0] + 1, values[0] + 1)
    finally:
        env.close()


@pytest.mark.parametrize("num_workers", [0, 1])
def test_branch_revives_finished_and_never_reset_children(num_workers):
    env = GroupVectorEnv(TOY, num_envs=4, group_size=4, max_steps=12, num_workers=num_workers)
    try:
        env.reset(seed=2, options={"reset_mask": np.array([True, True, True, False])})
        assert env.finished[3]
        need = env.call("target")[2] - env.call("value")[2]  # member 2 reaches its target and wins
        for _ in range(need):
            obs, rew, term, trunc, info = env.step(["x", "dec", "inc", "inc"])
        assert term[2] and env.finished.tolist() == [False, False, True, True]
        obs, infos = env.branch(1, [2, 3])
        assert env.finished.tolist() == [False, False, False, False]
        assert infos["active"][[2, 3]].all() and not infos["_active"][[0, 1]].any()
        obs, rew, term, trunc, info = env.step(["dec", "inc", "inc", "dec"])
        assert obs[1] == obs[2] and info["active"].all() and not (term | trunc)[[2, 3]].any()
        assert env.call("value")[3] == env.call("value")[1] - 2
    finally:
        env.close()


def test_branch_refuses_bad_members_before_touching_any():
    env = GroupVectorEnv(TOY, num_envs=8, group_size=4, max_steps=3)
    with pytest.raises(ValueError, match="parent 0 has no episode"):
        env.branch(0, [1])
    env.reset(seed=1)
    env.step(["inc"] * 8)
    before = (list(env._obs), [dict(i) for i in env._infos], env.finished.tolist(), env.call("value"))
    bad = [
        ((1, [1, 2]), ValueError, "both the parent and a child"),
        ((1, [2, 2]), ValueError, r"children name members \[2\] more than once"),
        ((1, [8]), ValueError, "children member 8 is out of range"),
        ((-1, [0]), ValueError, "parent -1 is out of range"),
        ((1, [5]), ValueError, r"children \[5\] are not in task group 0 \(members 0..3\)"),
        ((1, []), ValueError, "children is empty"),
        ((True, [0]), TypeError, "parent must be a member index"),
        ((1, "23"), TypeError, "children must be a sequence"),
        ((1, [2.0]), TypeError, "children member must be a member index"),
    ]
    for args, error, message in bad:
        with pytest.raises(error, match=message):
            env.branch(*args)
    assert (list(env._obs), [dict(i) for i in env._infos], env.finished.tolist(), env.call("value")) == before
    obs, infos = env.branch(np.int64(1), np.array([2, 0]))  # numpy indices are fine
    assert len(obs) == 2
    env.step(["inc"] * 8)
    env.step(["inc"] * 8)  # max_steps=3: every member is done
    with pytest.raises(ValueError, match="parent 1's episode is over"):
        env.branch(1, [2])
    env.close()
    with pytest.raises(EnvClosedError):
        env.branch(1, [2])


def test_a_child_whose_worker_died_needs_a_reset_and_the_branch_says_so():
    env = GroupVectorEnv(TOY, num_envs=4, group_size=4, num_workers=2, worker_timeout=30)
    try:
        env.reset(seed=3)
        env._workers[1].process.kill()
        env._workers[1].process.join(timeout=10)
        with pytest.raises(RuntimeError, match=r"failed for 2 of 3 children \(first: member 2: worker for members"):
            env.branch(0, [1, 2, 3])
        assert env.worker_restarts == 1
        assert env.finished.tolist() == [False, False, True, True] and env._needs_reset[2:].all()
        assert env._obs[1] == env._obs[0]  # the child on the live worker was forked
        obs, rew, term, trunc, info = env.step(["inc"] * 4)
        assert obs[0] == obs[1] and not info["active"][2]
        env.reset(seed=3)
    finally:
        env.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_node_snapshot_restores_into_members_after_the_chains_ended(num_workers):
    """Tree-GRPO's expansion of a node of a finished chain: snapshot(i) mid-episode, restore(members, it) later."""
    env = GroupVectorEnv(TOY, num_envs=8, group_size=4, max_steps=4, num_workers=num_workers)
    try:
        env.reset(seed=6)
        env.step(["inc", "dec", "inc", "dec"] * 2)
        node = env.snapshot(1)
        assert node.elapsed == 1 and not node.finished and node.group_id == 0
        after = [env.step(["x", "inc", "dec", "x"] * 2) for _ in range(3)]
        assert env.finished.all()
        obs, infos = env.restore([0, 2], node)
        assert obs == [node.observation] * 2 and infos["_active"].tolist() == [True, False, True] + [False] * 5
        assert env.finished.tolist() == [False, True, False] + [True] * 5
        obs, rew, term, trunc, info = env.step(["inc", "x", "inc", "x"] * 2)
        relived = (after[0][0][1], after[0][1][1], after[0][2][1], after[0][3][1])
        assert (obs[0], rew[0], term[0], trunc[0]) == (obs[2], rew[2], term[2], trunc[2]) == relived
        ended = env.snapshot(5)  # a snapshot after the episode ended restores finished members
        obs, infos = env.restore([4, 6], ended)
        assert env.finished[[4, 6]].all() and not infos["active"][[4, 6]].any() and obs == [ended.observation] * 2
        with pytest.raises(ValueError, match=r"members \[1\] are not in task group 1"):
            env.restore([1], ended)
        with pytest.raises(TypeError, match="MemberSnapshot"):
            env.restore([4], {"observation": "x"})
        other = GroupVectorEnv("tests.envs.test_spec:CorridorEnv", num_envs=4, group_size=4)
        other.reset(seed=0)
        foreign = other.snapshot(0)
        other.close()
        before = env.call("value")
        with pytest.raises(ValueError, match=r"restore failed for 2 of 2 members \(first: member 0: ValueError: "
                                             r"the snapshot was taken from a .*CorridorEnv"):
            env.restore([0, 3], foreign)
        assert env.call("value") == before
    finally:
        env.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_snapshots_of_several_members_come_in_one_request_and_equal_single_snapshots(num_workers):
    env = GroupVectorEnv(TOY, num_envs=8, group_size=4, max_steps=4, num_workers=num_workers)
    try:
        env.reset(seed=3)
        env.step(["inc", "dec", "inc", "x"] * 2)
        many = env.snapshots([6, 1, 2])
        assert [(s.group_id, s.elapsed, s.observation) for s in many] == [
            (s.group_id, s.elapsed, s.observation) for s in (env.snapshot(6), env.snapshot(1), env.snapshot(2))]
        with pytest.raises(ValueError, match="more than once"):
            env.snapshots([1, 1])
        with pytest.raises(TypeError, match="sequence of member indices"):
            env.snapshots(3)
        fresh = GroupVectorEnv(TOY, num_envs=4, group_size=4, max_steps=4, num_workers=num_workers)
        try:
            fresh.reset(seed=0, options={"reset_mask": np.array([True, False, False, False])})
            with pytest.raises(ValueError, match="member 1 has no episode"):
                fresh.snapshots([0, 1])
        finally:
            fresh.close()
    finally:
        env.close()


def test_a_worker_that_cannot_be_replaced_crashes_its_members_and_the_step_of_the_others_is_kept(tmp_path):
    """A dead worker whose replacement cannot build its members: the step still returns, with the other worker's
    members stepped and recorded and the lost ones crashed; every request keeps answering, a reset names the
    members it could not reset, and once the replacement can start again a reset brings every member back."""
    import signal

    from agentgym_credit.errors import ResetError
    from agentgym_credit.wrappers import RecordStepBatch

    block = tmp_path / "block"
    env = RecordStepBatch(GroupVectorEnv("tests.envs.toy_envs:FragileCounterEnv", num_envs=4, group_size=2,
                                         num_workers=2, block=str(block), max_steps=3))
    try:
        env.reset(seed=3, options={"start": 0})
        env.step(["inc"] * 4)
        block.touch()
        os.kill(env.unwrapped._workers[1].process.pid, signal.SIGKILL)  # members 2 and 3
        env.unwrapped._workers[1].process.join(5)
        obs, rew, term, trunc, info = env.step(["inc"] * 4)
        assert obs[0].startswith("value 2 ") and obs[1].startswith("value 2 ")  # their step was not lost
        assert trunc.tolist() == [False, False, True, True] and info["crashed"][2] and info["crashed"][3]
        assert "could not be restarted" in info["worker_error"][2]
        env.step(["inc"] * 4)  # the last step of members 0 and 1
        with pytest.raises(RuntimeError, match="could not be restarted"):
            env.unwrapped.call("value")
        batch = env.batch()
        assert batch.num_trajectories == 4 and sorted(batch.traj_length.tolist()) == [2, 2, 3, 3]
        with pytest.raises(ResetError, match="could not be restarted"):
            env.reset(seed=4)
        block.unlink()
        obs, info = env.reset(seed=4)
        assert info["active"].all() and obs[2] == obs[3]
    finally:
        env.close()
