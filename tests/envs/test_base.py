"""The member-env contract of ``GroupMemberEnv``: failed resets, step before reset, checked arguments.

Checked on every registered environment with a reset that each one refuses.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentgym_credit  # noqa: F401
from agentgym_credit.envs.base import (
    NonTextAction,
    as_text_action,
    check_reset_options,
    check_seed,
    id_option,
    integer_option,
)
from agentgym_credit.errors import ResetNeeded

# one refused reset per environment (the examples)
BAD_RESETS = {
    "Sokoban-Group-v0": {"state": "garbage"},
    "WebShop-Group-v0": {"goal_id": -1},
    "SearchQA-Group-v0": {"task_id": "no such question"},
    "ALFWorld-Group-v0": {"game_index": -1},
}


@pytest.fixture(scope="module", params=sorted(BAD_RESETS))
def member(request):
    env = gym.make(request.param, max_steps=15).unwrapped
    yield request.param, env
    env.close()


def _any_action(env) -> str:
    return (env._last_info.get("admissible_actions") or ["<search>x</search>"])[0]


def test_step_before_any_reset_raises_reset_needed(member):
    env_id, _ = member
    fresh = gym.make(env_id, max_steps=15).unwrapped
    with pytest.raises(ResetNeeded, match="reset"):
        fresh.step("anything")
    with pytest.raises(gym.error.ResetNeeded):  # Gymnasium's own exception type catches it too
        fresh.step("anything")


def test_failed_reset_never_continues_or_revives_an_episode(member):
    env_id, env = member
    bad = BAD_RESETS[env_id]
    with pytest.raises((ValueError, TypeError, KeyError)):
        env.reset(options=bad)
    with pytest.raises(ResetNeeded, match="last reset"):
        env.step("x")
    # after a good episode (running, then ended), a failed reset does not let it go on
    env.reset(seed=1)
    env.step(_any_action(env))
    with pytest.raises((ValueError, TypeError, KeyError)):
        env.reset(options=bad)
    with pytest.raises(ResetNeeded):
        env.step(_any_action(env))
    env.reset(seed=1)
    for _ in range(env.max_steps):
        env.step("not an action at all")
    with pytest.raises((ValueError, TypeError, KeyError)):
        env.reset(options=bad)
    with pytest.raises(ResetNeeded):
        env.step("x")
    obs, info = env.reset(seed=1)  # and a good reset works again
    assert isinstance(obs, str) and info["group_id"] == 0


def test_truncated_episode_never_reports_terminated(member):
    _, env = member
    env.reset(seed=2)
    flags = [env.step("not an action at all")[2:4] for _ in range(env.max_steps + 3)]
    assert flags[env.max_steps - 1] == (False, True)
    assert all(f == (False, True) for f in flags[env.max_steps - 1:])
    assert not any(term for term, _ in flags)


def test_group_id_does_not_carry_over_and_ids_are_checked(member):
    _, env = member
    assert env.reset(seed=3, options={"group_id": 5})[1]["group_id"] == 5
    assert env.reset(seed=3)[1]["group_id"] == 0
    assert env.reset(seed=np.int64(3), options={"group_id": np.int32(2)})[1]["group_id"] == 2
    with pytest.raises(ValueError, match="fractions are not truncated"):
        env.reset(options={"group_id": 1.5})
    for negative in (-1, np.int64(-5), -(2**70), -3.0):  # the same clear error in every environment
        with pytest.raises(ValueError, match=r"options\['group_id'\] must be a non-negative int"):
            env.reset(seed=0, options={"group_id": negative})
        with pytest.raises(ResetNeeded):
            env.step("x")
    assert env.reset(seed=2**100, options={"group_id": 2**70})[1]["group_id"] == 2**70
    with pytest.raises(TypeError, match="options must be a dict"):
        env.reset(options=[("group_id", 1)])
    with pytest.raises(TypeError, match="seed"):
        env.reset(seed=1.0)
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-3)


def test_same_seed_same_start_with_numpy_and_python_ints(member):
    _, env = member
    a = env.reset(seed=11)[0]
    b = env.reset(seed=np.uint16(11))[0]
    assert a == b


def test_argument_checks():
    assert check_seed(None) is None and check_seed(np.int64(4)) == 4 and type(check_seed(np.int8(4))) is int
    for bad in (True, 2.0, "3", [1]):
        with pytest.raises(TypeError):
            check_seed(bad)
    assert check_reset_options({"goal_id": 3.0, "room_seed": np.int64(2), "state": "x"}) == {
        "goal_id": 3, "room_seed": 2, "state": "x"}
    for bad, err in (({"goal_index": 2.5}, ValueError), ({"task_id": float("nan")}, ValueError),
                     ({"group_id": "1"}, TypeError), ({"group_id": True}, TypeError), ({1: 2}, TypeError),
                     ({"group_id": None}, TypeError), ({"group_id": -1}, ValueError),
                     ("group_id=1", TypeError)):
        with pytest.raises(err):
            check_reset_options(bad)


def test_integer_options_are_ints_in_range_and_errors_name_them():
    assert integer_option({}, "game_index", 3) is None
    assert integer_option({"game_index": None}, "game_index", 3) is None
    assert integer_option(check_reset_options({"game_index": 2.0}), "game_index", 3) == 2
    assert type(integer_option({"room_seed": np.uint64(2**64 - 1)}, "room_seed")) is int
    assert integer_option({"room_seed": 2**200}, "room_seed") == 2**200
    for value, err in ((3, ValueError), (-1, ValueError), (10**5000, ValueError), ("1", TypeError),
                       (True, TypeError), (np.bool_(False), TypeError), (2.0, TypeError), ([1], TypeError)):
        with pytest.raises(err, match=r"options\['game_index'\] must be an int in \[0, 3\)"):
            integer_option({"game_index": value}, "game_index", 3)


def test_id_options_are_known_str_ids_and_errors_name_them():
    positions = {"a": 0, "b": 1}
    assert id_option({}, "task_id", positions, "env.tasks") is None
    assert id_option({"task_id": None}, "task_id", positions, "env.tasks") is None
    assert id_option({"task_id": "b"}, "task_id", positions, "env.tasks") == 1
    with pytest.raises(ValueError, match=r"unknown task_id 'c': options\['task_id'\] must be the id of one"):
        id_option({"task_id": "c"}, "task_id", positions, "env.tasks")
    for bad in (0, b"a", ["a"], 1.0):
        with pytest.raises(TypeError, match=r"options\['task_id'\] must be a str"):
            id_option({"task_id": bad}, "task_id", positions, "env.tasks")


def test_seed_and_option_errors_show_a_brief_repr():
    class BadRepr:
        def __repr__(self):
            raise RuntimeError("no")

    with pytest.raises(ValueError, match="seed must be a non-negative int or None, got <int of"):
        check_seed(-(10**5000))
    with pytest.raises(TypeError, match="option names must be str, got BadRepr"):
        check_reset_options({BadRepr(): 1})


def test_non_text_actions_become_picklable_stand_ins():
    import pickle

    class Odd(str):
        pass

    assert type(as_text_action(Odd("up"))) is str
    stand_in = as_text_action(lambda: 0)
    assert isinstance(stand_in, NonTextAction) and stand_in.type_name == "function"
    assert pickle.loads(pickle.dumps(stand_in)) == stand_in

    class BadRepr:
        def __repr__(self):
            raise RuntimeError("no")

    assert "failing repr" in as_text_action(BadRepr()).text


def test_an_integer_action_is_an_invalid_step_that_says_actions_are_text(member):
    """``env.step(0)`` (a Gymnasium habit) changes nothing and says why in ``info["error"]``."""
    env_id, env = member
    obs, info = env.reset(seed=0)
    after, reward, terminated, truncated, info = env.step(0)
    assert info["action_valid"] is False and reward <= 0.0 and not terminated and after == obs
    assert info["error"] == "actions are text; got int 0 (pass the command as a str)"
    assert env.step(np.int64(2))[4]["error"].startswith("actions are text; got int64 ")
    assert env.step(lambda: 0)[4]["error"] == "actions are text; got function (pass the command as a str)"


def _vandalize(info: dict) -> None:
    """What a careless caller may do to an info it was handed: grow, reorder and empty its containers."""
    for value in list(info.values()):
        if isinstance(value, list):
            value.append("go to the moon")
            value.reverse()
        elif isinstance(value, dict):
            value.clear()
    info["anchor"], info["won"], info["admissible_actions"] = "forged", True, ["go to the moon"]


def _transcript(env, vandal: bool) -> list:
    """An episode of admissible first actions, then one step after its end; with ``vandal`` every info the
    env returns is vandalized before the next step."""
    out = []
    obs, info = env.reset(seed=5)
    for _ in range(env.max_steps + 1):
        action = info["admissible_actions"][0] if info["admissible_actions"] else "<search>x</search>"
        out.append((obs, repr(sorted(info.items()))))
        if vandal:
            info["admissible_actions"].append("go to the moon")  # appended to the list the action came from
            _vandalize(info)
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((reward, terminated, truncated))
    out.append((obs, repr(sorted(info.items()))))
    return out


def test_changing_a_returned_info_changes_nothing_in_the_env(member):
    """Every info ``reset`` and ``step`` return is the caller's own: emptying, growing or rewriting it (its
    admissible actions, anchor, nested dicts) neither changes what the env accepts next nor what it reports
    — ALFWorld once checked commands against the list it had handed out, so an appended command passed."""
    _, env = member
    assert _transcript(env, vandal=True) == _transcript(env, vandal=False)
    env.reset(seed=5)
    action = env._last_info["admissible_actions"][0] if env._last_info["admissible_actions"] else "x"
    info = env.step(action)[4]
    info["admissible_actions"].append("go to the moon")
    assert "go to the moon" not in env._last_info["admissible_actions"]
