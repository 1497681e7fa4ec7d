"""Forking a member mid-episode: ``snapshot()`` / ``restore()`` on every environment and the corridor family.

A fork at a random step followed by the same actions gives the transcript (observations, rewards, flags,
infos) of the original going on, in this process and in another one; forked siblings do not see each
other's changes; bad snapshots are refused with the member left as it was.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import multiprocessing
import os
import pickle
import random
import zlib
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_credit  # noqa: F401
from agentgym_credit.envs.base import GroupMemberEnv, NonTextAction
from agentgym_credit.envs.fork import MemberSnapshot, ResetRecord, generator_from_state
from agentgym_credit.envs.sokoban.env import SokobanEnv
from agentgym_credit.envs.webshop.pages import PageKind
from agentgym_credit.errors import ResetNeeded
from tests.envs.test_spec import CorridorEnv
from tests.envs.toy_envs import CounterEnv

CHEAP = ["Sokoban-Group-v0", "WebShop-Group-v0", "SearchQA-Group-v0", "Corridor"]
ALFWORLD = "ALFWorld-Group-v0"
FORK = settings(max_examples=12, deadline=None)


class NativeCorridorEnv(CorridorEnv):
    """The corridor forking natively through the one-line hook: the attribute that holds its state."""

    fork_attributes = ("position",)


@functools.lru_cache(maxsize=1)
def _alfworld_game() -> Any:
    probe = gym.make(ALFWORLD).unwrapped
    return probe.games[0].game_file  # look_at_obj_in_light, 11-command walkthrough with a "take"


def build(env_id: str) -> GroupMemberEnv:
    """A fresh member of ``env_id`` (the corridor families, one ALFWorld game for speed, AppWorld's tasks)."""
    if env_id == "Corridor":
        return CorridorEnv(length=6, max_steps=8)
    if env_id == "NativeCorridor":
        return NativeCorridorEnv(length=6, max_steps=8)
    if env_id == ALFWORLD:
        return gym.make(ALFWORLD, game_files=[_alfworld_game()], max_steps=20).unwrapped
    if env_id == APPWORLD:
        return _appworld_member()
    return gym.make(env_id, max_steps=8).unwrapped


def policy_action(env_id: str, info: dict[str, Any], rng: np.random.Generator) -> Any:
    """A reproducible action: mostly admissible, sometimes malformed or not text."""
    roll = rng.random()
    if roll < 0.05:
        return 42  # not text: a clean invalid step
    if roll < 0.12:
        return "gibberish"
    if env_id == "SearchQA-Group-v0":
        words = str(info["task"]).split()
        query = " ".join(rng.choice(words, size=min(3, len(words)), replace=False))
        return f"<search>{query}</search>" if rng.random() < 0.8 else f"<answer>{words[-1]}</answer>"
    admissible = list(info["admissible_actions"]) or ["noop"]
    action = str(rng.choice(admissible))
    if action == "search[...]":  # WebShop's search page: search for words of the instruction
        words = str(info["task"]).split()
        return f"search[{' '.join(words[2:6])}]"
    return action


def play(env: GroupMemberEnv, actions: list[Any]) -> list[tuple]:
    """The transcript of ``actions``: every step's observation, reward, flags and info."""
    return [env.step(a) for a in actions]


def continue_with_policy(env_id: str, env: GroupMemberEnv, info: dict, rng: np.random.Generator, n: int):
    """Step ``env`` ``n`` times with the policy; returns the actions and the transcript."""
    actions, transcript = [], []
    for _ in range(n):
        action = policy_action(env_id, info, rng)
        out = env.step(action)
        actions.append(action)
        transcript.append(out)
        info = out[4]
    return actions, transcript, info


def fingerprint(env: GroupMemberEnv) -> tuple:
    """Everything a restore could change: observation, info, step count, history, RNG, flags, engine state."""
    if env.needs_reset:
        return ("no episode", env.np_random.bit_generator.state)
    return (env._last_obs, env._last_info, env.elapsed_steps, env.action_history, env.episode_over,
            env._terminated, env._truncated, env.np_random.bit_generator.state, env._snapshot_state())


@pytest.fixture(scope="module")
def members() -> dict[str, tuple[GroupMemberEnv, GroupMemberEnv, GroupMemberEnv]]:
    """Three members per environment (original, fork, sibling), built once."""
    built = {env_id: (build(env_id), build(env_id), build(env_id)) for env_id in [*CHEAP, "NativeCorridor"]}
    yield built
    for trio in built.values():
        for env in trio:
            env.close()


def check_fork(env_id: str, trio, seed: int, fork_at: int, policy_seed: int, through_pickle: bool = True):
    original, fork, _ = trio
    rng = np.random.default_rng(policy_seed)
    obs, info = original.reset(seed=seed)
    _, _, info = continue_with_policy(env_id, original, info, rng, fork_at)
    snap = original.snapshot()
    rng_at_fork = original.np_random.bit_generator.state
    if through_pickle:
        snap = pickle.loads(pickle.dumps(snap))
    fork.reset(seed=seed + 1)  # the fork replaces whatever episode the member had
    fork.step("gibberish")
    f_obs, f_info = fork.restore(snap)
    assert (f_obs, f_info) == (original._last_obs, original._last_info)
    assert fork.elapsed_steps == original.elapsed_steps == fork_at or original.episode_over
    assert fork.action_history == original.action_history
    assert fork.np_random.bit_generator.state == rng_at_fork
    actions, expected, _ = continue_with_policy(env_id, original, info, rng, 5)
    assert play(fork, actions) == expected
    assert fork.np_random.bit_generator.state == original.np_random.bit_generator.state


@pytest.mark.parametrize("env_id", [*CHEAP, "NativeCorridor"])
@FORK
@given(seed=st.integers(0, 40), fork_at=st.integers(0, 7), policy_seed=st.integers(0, 2**16))
def test_a_fork_at_a_random_step_continues_like_the_original(members, env_id, seed, fork_at, policy_seed):
    check_fork(env_id, members[env_id], seed, fork_at, policy_seed)


def test_fork_methods_are_as_documented():
    assert [SokobanEnv.fork_method, CorridorEnv.fork_method, NativeCorridorEnv.fork_method] == [
        "native", "replay", "native"]
    from agentgym_credit.envs.alfworld.env import ALFWorldEnv
    from agentgym_credit.envs.searchqa.env import SearchQAEnv
    from agentgym_credit.envs.webshop.env import WebShopEnv

    assert (WebShopEnv.fork_method, SearchQAEnv.fork_method, ALFWorldEnv.fork_method) == ("native", "native", "replay")
    with pytest.raises(TypeError, match="fork_method"):
        type("Bad", (CorridorEnv,), {"fork_method": "copy"})


def test_alfworld_forks_by_replay_mid_walkthrough():
    """Small (ALFWorld is slow): forks at two depths of the walkthrough and one random continuation."""
    trio = (build(ALFWORLD), build(ALFWORLD), build(ALFWORLD))
    try:
        original, fork, sibling = trio
        obs, info = original.reset(seed=0)
        walkthrough = info["walkthrough"]
        for depth in (3, 6):
            original.reset(seed=0)
            play(original, walkthrough[:depth])
            original.expert_next_action()  # the oracle's plan travels in the snapshot
            snap = pickle.loads(pickle.dumps(original.snapshot()))
            assert snap.method == "replay" and snap.actions == tuple(walkthrough[:depth])
            fork.restore(snap)
            assert fingerprint(fork) == fingerprint(original)
            assert fork.expert_next_action() == original.expert_next_action()
            rest = walkthrough[depth:]
            assert play(fork, rest) == play(original, rest)
            assert fork._last_info["won"] and fork.episode_over
        # siblings: one takes the book, the other's engine still has it in the drawer
        original.reset(seed=0)
        play(original, walkthrough[:4])  # ... open drawer 1
        take = walkthrough[4]
        assert take.startswith("take ")
        fork.restore(original.snapshot())
        sibling.restore(original.snapshot())
        fork.step(take)
        assert fork._engine.inventory() and not sibling._engine.inventory()
        assert take in sibling._last_info["admissible_actions"] and "Holding: nothing" in sibling._last_info["anchor"]
        assert sibling.step(take) == original.step(take)
        check_fork(ALFWORLD, trio, seed=0, fork_at=4, policy_seed=3)
    finally:
        for env in trio:
            env.close()


# ------------------------------------------------------------------------------------ another process
def _restore_and_play(env_id: str, snapshot_bytes: bytes, actions: list[Any]) -> tuple[Any, list[tuple]]:
    """In a worker process: restore the pickled snapshot into a fresh member and play ``actions``."""
    env = build(env_id)
    try:
        restored = env.restore(pickle.loads(snapshot_bytes))
        return restored, play(env, actions)
    finally:
        env.close()


def test_a_snapshot_restores_in_another_process(members):
    ctx = multiprocessing.get_context("spawn")
    cases = []
    for env_id in [*CHEAP, "NativeCorridor", ALFWORLD]:
        original = members[env_id][0] if env_id != ALFWORLD else build(ALFWORLD)
        rng = np.random.default_rng(7)
        _, info = original.reset(seed=3)
        _, _, info = continue_with_policy(env_id, original, info, rng, 3)
        blob = pickle.dumps(original.snapshot())
        at_fork = (original._last_obs, original._last_info)
        actions, expected, _ = continue_with_policy(env_id, original, info, rng, 4)
        cases.append((env_id, blob, actions, at_fork, expected))
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        futures = [pool.submit(_restore_and_play, env_id, blob, actions) for env_id, blob, actions, *_ in cases]
        for (env_id, _, _, at_fork, expected), future in zip(cases, futures, strict=True):
            restored, transcript = future.result(timeout=300)
            assert restored == at_fork, env_id
            assert transcript == expected, env_id


# ----------------------------------------------------------------------------------------- siblings
def _fork_twice(trio, snap):
    _, first, second = trio
    first.restore(snap)
    second.restore(snap)
    return first, second


def test_sokoban_siblings_do_not_share_the_room(members):
    trio = members["Sokoban-Group-v0"]
    original = trio[0]
    plan = []
    for seed in range(11, 40):  # a room whose optimal plan fits the 8 steps
        _, info = original.reset(seed=seed)
        plan = info["walkthrough"]
        if 2 <= len(plan) <= 8:
            break
    snap = original.snapshot()
    pusher, other = _fork_twice(trio, snap)
    before = other.room_state
    for move in plan:  # the optimal plan pushes the box (and solves the room)
        pusher.step(move)
    assert pusher.room_state.boxes != before.boxes and pusher.episode_over
    assert other.room_state == before and other.elapsed_steps == 0 and not other.episode_over
    assert play(other, plan) == play(original, plan)


def test_webshop_one_child_buys_and_the_others_page_and_session_are_unchanged(members):
    trio = members["WebShop-Group-v0"]
    original = trio[0]
    _, info = original.reset(seed=2)
    words = " ".join(info["task"].split()[2:6])
    _, _, _, _, info = original.step(f"search[{words}]")
    shown = {asin.lower() for asin in original.page.page_results}
    asin = next(a for a in info["admissible_actions"] if a[len("click["):-1] in shown)
    _, _, _, _, info = original.step(asin)
    assert original.page.kind is PageKind.ITEM
    buyer, other = _fork_twice(trio, original.snapshot())
    page, obs = other.page, other._last_obs
    _, reward, terminated, _, bought = buyer.step("click[buy now]")
    assert terminated and buyer.page.kind is PageKind.DONE and "purchased" in bought
    assert other.page == page and other.page.kind is PageKind.ITEM and other.page.score is None
    assert other._last_obs == obs and not other.episode_over
    assert other.page.visited == buyer.page.visited  # the session's visited products, copied not shared
    assert play(other, ["click[description]", "click[< prev]"]) == play(original, ["click[description]", "click[< prev]"])


def test_searchqa_one_child_answers_and_the_others_transcript_is_unchanged(members):
    trio = members["SearchQA-Group-v0"]
    original = trio[0]
    _, info = original.reset(seed=4)
    original.step(f"<search>{info['task']}</search>")
    answerer, other = _fork_twice(trio, original.snapshot())  # in-process: restored from one object
    history, information = list(other._history), list(other._information)
    answerer.step("<search>another query entirely</search>")
    answerer.step("<answer>nobody</answer>")
    assert answerer.episode_over and len(answerer._information) == 2
    assert other._history == history and other._information == information and not other.episode_over
    assert other._history is not answerer._history and other._information is not answerer._information
    actions = ["<answer>nobody</answer>"]
    assert play(other, actions) == play(original, actions)


def test_corridor_siblings_walk_apart(members):
    for env_id in ("Corridor", "NativeCorridor"):
        trio = members[env_id]
        original = trio[0]
        original.reset(seed=0)
        walker, other = _fork_twice(trio, original.snapshot())
        start = other.position
        walker.step("right")
        assert walker.position == min(start + 1, 5) and other.position == start


# ---------------------------------------------------------------------------------------- contract
@pytest.mark.parametrize("env_id", [*CHEAP, "NativeCorridor"])
def test_snapshot_needs_an_episode_and_an_ended_one_restores_finished(members, env_id):
    original, fork, _ = members[env_id]
    with pytest.raises(ResetNeeded, match="reset"):
        build(env_id).snapshot()
    with pytest.raises((TypeError, ValueError)):
        original.reset(seed=-1)
    with pytest.raises(ResetNeeded, match="last reset"):
        original.snapshot()
    _, info = original.reset(seed=1)
    rng = np.random.default_rng(0)
    while not original.episode_over:
        info = original.step(policy_action(env_id, info, rng))[4]
    snap = original.snapshot()
    assert snap.episode_over and snap.finished
    obs, _ = fork.restore(snap)
    assert fork.episode_over and obs == original._last_obs
    step = fork.step("anything")
    assert step[:4] == (obs, 0.0, original._terminated, original._truncated) and step[4]["episode_over"]


def test_a_member_whose_step_raised_cannot_be_snapshot():
    env = CounterEnv()
    env.reset(seed=0)
    env.step("inc")
    with pytest.raises(RuntimeError, match="member bug"):
        env.step("raise")
    with pytest.raises(RuntimeError, match="step 2 raised RuntimeError"):
        env.snapshot()
    env.reset(seed=0)
    assert env.snapshot().elapsed == 0


def test_a_snapshot_does_not_change_when_the_member_goes_on(members):
    original, fork, _ = members["SearchQA-Group-v0"]
    _, info = original.reset(seed=5)
    snap = original.snapshot()
    first = (original._last_obs, dict(original._last_info))
    original._last_info["task"] = "mutated by a caller"  # step() hands out the member's own info dict
    original.step("<search>anything</search>")
    assert fork.restore(snap) == first and snap.elapsed == 0


def test_reset_with_seed_none_forks_by_replay_from_the_recorded_generator():
    env, other = CorridorEnv(length=9, max_steps=8), CorridorEnv(length=9, max_steps=8)
    env.reset()  # unseeded: the task comes from the running generator
    env.step("left")
    snap = env.snapshot()
    assert snap.reset.seed is None
    other.reset(seed=123)
    assert other.restore(snap)[0] == env._last_obs and other.position == env.position


def test_non_text_actions_are_recorded_as_picklable_stand_ins():
    env = CorridorEnv()
    env.reset(seed=0)
    env.step(object())
    env.step("right")
    assert isinstance(env.action_history[0], NonTextAction) and env.action_history[1] == "right"
    other = CorridorEnv()
    assert other.restore(pickle.loads(pickle.dumps(env.snapshot())))[0] == env._last_obs


# ---------------------------------------------------------------------------------------- bad input
def _corrupt_state(snap: MemberSnapshot) -> MemberSnapshot:
    return dataclasses.replace(snap, state={"junk": 1})


def _corrupt_replay(snap: MemberSnapshot) -> MemberSnapshot:
    actions = list(snap.actions)
    actions[-1] = "left" if actions[-1] != "left" else "right"
    return dataclasses.replace(snap, actions=tuple(actions))


CORRUPTIONS = {
    "not a snapshot": (lambda snap: {"observation": snap.observation}, TypeError, "MemberSnapshot"),
    "another version": (lambda snap: dataclasses.replace(snap, version=99), ValueError, "version"),
    "another class": (lambda snap: dataclasses.replace(snap, env_class="x.OtherEnv"), ValueError, "OtherEnv"),
    "other settings": (lambda snap: dataclasses.replace(snap, settings={"max_steps": 3}), ValueError, "settings"),
    "step count": (lambda snap: dataclasses.replace(snap, elapsed=snap.elapsed + 1), ValueError, "corrupt"),
    "flags": (lambda snap: dataclasses.replace(snap, terminated=True, truncated=True), ValueError, "corrupt"),
    "info": (lambda snap: dataclasses.replace(snap, info="text"), ValueError, "corrupt"),
    "rng": (lambda snap: dataclasses.replace(snap, rng_state={"bit_generator": "Nope"}), ValueError, "np_random"),
    "rng fields": (lambda snap: dataclasses.replace(snap, rng_state={"bit_generator": "PCG64"}), ValueError,
                   "np_random"),
    "history": (lambda snap: dataclasses.replace(snap, actions=(*snap.actions[:-1], 3.5)), ValueError, "corrupt"),
    "reset record": (lambda snap: dataclasses.replace(snap, reset=ResetRecord(-4, {}, snap.reset.rng_state)),
                     ValueError, "corrupt"),
}


@pytest.mark.parametrize("env_id", [*CHEAP, "NativeCorridor"])
@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_bad_snapshots_are_refused_and_the_member_is_left_as_it_was(members, env_id, corruption):
    original, fork, _ = members[env_id]
    make_bad, error, message = CORRUPTIONS[corruption]
    _, info = original.reset(seed=2)
    continue_with_policy(env_id, original, info, np.random.default_rng(1), 2)
    bad = make_bad(original.snapshot())
    _, info = fork.reset(seed=9)
    continue_with_policy(env_id, fork, info, np.random.default_rng(2), 1)
    before = fingerprint(fork)
    with pytest.raises(error, match=message):
        fork.restore(bad)
    assert fingerprint(fork) == before


@pytest.mark.parametrize("env_id", ["Sokoban-Group-v0", "WebShop-Group-v0", "SearchQA-Group-v0", "NativeCorridor"])
def test_a_corrupt_engine_state_is_refused_and_the_member_is_left_as_it_was(members, env_id):
    original, fork, _ = members[env_id]
    original.reset(seed=2)
    fork.reset(seed=3)
    before = fingerprint(fork)
    with pytest.raises(ValueError, match="corrupt"):
        fork.restore(_corrupt_state(original.snapshot()))
    assert fingerprint(fork) == before


def test_a_replay_that_diverges_is_refused_and_the_member_is_left_as_it_was():
    original, fork = CorridorEnv(length=9, max_steps=8), CorridorEnv(length=9, max_steps=8)
    original.reset(seed=4)
    play(original, ["right", "right"])
    fork.reset(seed=5)
    play(fork, ["left"])
    before = fingerprint(fork)
    with pytest.raises(ValueError, match="did not reach its state"):
        fork.restore(_corrupt_replay(original.snapshot()))
    assert fingerprint(fork) == before
    twin = CorridorEnv(length=9, max_steps=8)
    twin.reset(seed=5)
    play(twin, ["left"])
    assert play(fork, ["right", "right"]) == play(twin, ["right", "right"])
    # a member without an episode stays without one
    fresh = CorridorEnv(length=9, max_steps=8)
    with pytest.raises(ValueError, match="did not reach its state"):
        fresh.restore(_corrupt_replay(original.snapshot()))
    with pytest.raises(ResetNeeded, match="reset"):
        fresh.step("right")


def test_a_snapshot_of_another_environment_class_is_refused(members):
    sokoban, _, _ = members["Sokoban-Group-v0"]
    webshop = members["WebShop-Group-v0"][1]
    sokoban.reset(seed=0)
    webshop.reset(seed=0)
    before = fingerprint(webshop)
    with pytest.raises(ValueError, match="SokobanEnv member and cannot be restored into a .*WebShopEnv"):
        webshop.restore(sokoban.snapshot())
    assert fingerprint(webshop) == before
    with pytest.raises(ValueError, match="settings"):
        gym.make("Sokoban-Group-v0", max_steps=8, reward="sparse").unwrapped.restore(sokoban.snapshot())


def test_generator_states_round_trip():
    rng = np.random.default_rng(5)
    rng.random(3)
    again = generator_from_state(rng.bit_generator.state)
    assert again.random() == rng.random()
    with pytest.raises(ValueError, match="np_random"):
        generator_from_state("PCG64")


# ----------------------------------------------------------------------------------------------- AppWorld
APPWORLD = "AppWorld-Group-v0"


@functools.lru_cache(maxsize=1)
def _appworld_script() -> tuple[str, tuple[str, ...]]:
    """The task ``pay_relationship_w101_1`` and code steps that win it, with steps between that print what a
    fork must carry exactly: the REPL's random numbers, the frozen clock, a set's order, access tokens (the
    world's random state), an error, a logged-out token."""
    from agentgym_credit.envs.appworld.tasks import load_tasks

    task = next(t for t in load_tasks(None, None) if t.task_id == "pay_relationship_w101_1")
    profile, phone, venmo, contacts, pay, complete = task.solution
    return task.task_id, (
        profile,
        "import random\nluck = random.random()\nprint(luck, datetime.datetime.now(), pendulum.now())",
        phone + "\nprint(phone_token[-12:])",
        "seen = set(passwords)\nprint(seen, Counter(''.join(seen)).most_common(3), random.random())",
        venmo + "\nprint(venmo_token[-12:])",
        "print(1 / 0)",
        contacts,
        "cousins = [c['email'] for c in contacts if 'cousin' in c['relationships']]\nprint(len(cousins))",
        "print(apis.venmo.logout(access_token=venmo_token))\n"
        + venmo.replace("venmo_token", "fresh_token") + "\nprint(fresh_token[-12:])",
        pay.replace("venmo_token", "fresh_token"),
        "print(apis.venmo.show_venmo_balance(access_token=fresh_token))",
        complete,
    )


def _appworld_member(**kwargs: Any) -> GroupMemberEnv:
    return gym.make(APPWORLD, split=None, max_steps=20, **kwargs).unwrapped


@pytest.fixture(scope="module")
def appworld_trio():
    from agentgym_credit.envs.appworld.engine import setup_appworld_venv

    setup_appworld_venv()
    trio = (_appworld_member(), _appworld_member(), _appworld_member())
    yield trio
    for env in trio:
        env.close()


def _balance(env: GroupMemberEnv) -> float:
    shown = env.step("print(apis.venmo.show_venmo_balance(access_token=venmo_token)['venmo_balance'])")[0]
    return float(shown)


@pytest.mark.parametrize("fork_at", sorted(np.random.default_rng(32).choice(11, size=3, replace=False)))
def test_appworld_forks_natively_and_continues_like_the_original(appworld_trio, fork_at):
    """A fork at a random step (drawn once, seeded) of a winning episode, through pickle, gives the same
    transcript as the original going on: outputs, rewards, flags and infos, to the reward of 10."""
    original, fork, _ = appworld_trio
    task_id, script = _appworld_script()
    original.reset(options={"task_id": task_id})
    play(original, list(script[:fork_at]))
    snap = pickle.loads(pickle.dumps(original.snapshot()))
    assert snap.method == "native" and snap.state["kind"] == "native"
    assert isinstance(snap.state["repl"], bytes)
    fork.reset(options={"task_id": task_id})  # the fork replaces the member's own episode
    fork.step("x = 1")
    assert fork.restore(snap) == (original._last_obs, original._last_info)
    assert fork.elapsed_steps == fork_at and fork.action_history == original.action_history
    rest = list(script[fork_at:])
    expected = play(original, rest)
    assert play(fork, rest) == expected
    assert expected[-1][1] == 10.0 and expected[-1][2] and "Error" not in expected[-1][0]


def test_appworld_siblings_do_not_see_each_others_payment(appworld_trio):
    """One child pays $22 to each cousin on Venmo; the other's database is unchanged: its diff against the
    task's start (what the grader reads) and its balance read through the API are the parent's."""
    original, payer, other = appworld_trio
    task_id, script = _appworld_script()
    original.reset(options={"task_id": task_id})
    play(original, list(script[:8]))  # logged in, the cousins found
    snap = original.snapshot()
    payer.restore(snap)
    other.restore(snap)
    before = original._world.request("diff")["changes"]
    balance = _balance(original)
    payer.step(script[9].replace("fresh_token", "venmo_token"))
    paid = payer._world.request("diff")["changes"]
    assert paid["venmo"]["transactions"]["added"] and "transactions" not in before.get("venmo", {})
    assert other._world.request("diff")["changes"] == before
    assert _balance(other) == balance and _balance(payer) < balance
    _, reward, terminated, _, info = other.step(script[-1])  # no payment: the grader fails it
    assert terminated and reward == 0.0 and info["checks_failed"]


def test_appworld_variables_that_do_not_pickle_fork_by_a_checked_replay(appworld_trio):
    """A function the agent defined cannot leave its REPL: the snapshot replays the code steps (seeded
    random, frozen clock, one hash seed: the same outputs) and checks the world's digest; code whose
    output a replay cannot repeat is refused with the member left as it was."""
    original, fork, _ = appworld_trio
    task_id, script = _appworld_script()
    steps = [*script[:3], "def cousin(c):\n    return 'cousin' in c['relationships']", *script[3:7]]
    original.reset(options={"task_id": task_id})
    play(original, steps)
    snap = pickle.loads(pickle.dumps(original.snapshot()))
    assert snap.state["kind"] == "replay" and "defined by the agent's code" in snap.state["reason"]
    fork.reset(options={"task_id": task_id})
    play(fork, ["kept = 41"])
    with pytest.raises(ValueError, match="did not rebuild its world"):  # another world, the same outputs
        fork.restore(dataclasses.replace(snap, state={**snap.state, "digest": "0" * 64}))
    assert fork.elapsed_steps == 1 and fork.step("print(kept)")[0].strip() == "41"
    assert fork.restore(snap) == (original._last_obs, original._last_info)
    rest = ["print(len([c for c in contacts if cousin(c)]))", *script[8:]]
    assert play(fork, rest) == play(original, rest)

    # a member restored from a copy, then defining a function: its replay rebuilds the same world
    _, _, sibling = appworld_trio
    original.reset(options={"task_id": task_id})
    play(original, list(script[:3]))
    fork.restore(original.snapshot())
    play(fork, steps[3:5])
    snap = fork.snapshot()
    assert snap.state["kind"] == "replay" and sibling.restore(snap) == (fork._last_obs, fork._last_info)
    assert play(sibling, list(script[4:8])) == play(fork, list(script[4:8]))

    original.reset(options={"task_id": task_id})
    play(original, [*steps[:4], "import uuid\nprint(uuid.uuid4())"])
    fork.reset(options={"task_id": task_id})
    play(fork, ["kept = 41"])
    with pytest.raises(ValueError, match="did not reach its state"):
        fork.restore(original.snapshot())
    assert fork.elapsed_steps == 1 and fork.step("print(kept)")[0].strip() == "41"


def test_appworld_a_fork_at_the_reset_is_a_reset(appworld_trio):
    original, fork, _ = appworld_trio
    task_id, script = _appworld_script()
    original.reset(options={"task_id": task_id})
    snap = original.snapshot()
    assert snap.state["kind"] == "replay" and snap.state["reason"] == "at the reset"
    assert fork.restore(snap) == (original._last_obs, original._last_info)
    assert play(fork, list(script[:3])) == play(original, list(script[:3]))


def test_appworld_a_snapshot_after_the_end_restores_a_finished_member(appworld_trio):
    original, fork, _ = appworld_trio
    task_id, script = _appworld_script()
    original.reset(options={"task_id": task_id})
    play(original, list(script))
    snap = original.snapshot()
    assert snap.finished and snap.state == {"kind": "ended", "task_id": task_id}
    obs, info = fork.restore(snap)
    assert fork.episode_over and info["won"] and fork.step("print(1)")[:4] == (obs, 0.0, True, False)


def test_appworld_repl_state_is_never_loaded_outside_a_sandboxed_repl(appworld_trio, monkeypatch):
    """The REPL's variables are opaque bytes in the snapshot: the client restores without unpickling
    anything; a forged REPL state is refused inside the fresh REPL, which the fork gets without them (its next
    observation says they are lost; the world is the snapshot's); a snapshot of a sandboxed member does not
    restore into one without the sandbox."""
    original, fork, _ = appworld_trio
    task_id, script = _appworld_script()
    original.reset(options={"task_id": task_id})
    play(original, list(script[:2]))
    snap = original.snapshot()

    def refuse(*args, **kwargs):
        raise AssertionError("the client unpickled something during a restore")

    with monkeypatch.context() as patch:
        patch.setattr(pickle, "loads", refuse)
        patch.setattr(pickle, "Unpickler", refuse)
        assert fork.restore(snap)[0] == original._last_obs
    fork.step("kept = 41")
    marker = f"/tmp/agc-fork-{os.getpid()}"

    class Gadget:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    forged = zlib.compress(pickle.dumps(({"x": Gadget()}, random.getstate())))
    bad = dataclasses.replace(snap, state={**snap.state, "repl": forged})
    assert fork.restore(bad)[0] == original._last_obs
    observation = fork.step("print(x, passwords)")[0]
    assert not os.path.exists(marker) and "variables defined in earlier steps are lost" in observation
    assert "NameError" in observation
    fork.restore(snap)
    fork.step("kept = 41")
    bad = dataclasses.replace(snap, state={**snap.state, "world": {**snap.state["world"], "images": {
        app: b"junk" for app in snap.state["world"]["images"]}}})
    with pytest.raises(ValueError, match="world does not load"):
        fork.restore(bad)
    with pytest.raises(ValueError, match="corrupt"):
        fork.restore(dataclasses.replace(snap, state={**snap.state, "task_id": "nope"}))
    assert fork.step("print(kept)")[0].strip() == "41"
    unsandboxed = _appworld_member(unsafe_no_sandbox=True)
    try:
        with pytest.raises(ValueError, match="unsafe_no_sandbox=False"):
            unsandboxed.restore(snap)
    finally:
        unsandboxed.close()


def test_appworld_a_snapshot_restores_in_another_process(appworld_trio):
    original = appworld_trio[0]
    task_id, script = _appworld_script()
    original.reset(options={"task_id": task_id})
    play(original, list(script[:5]))
    blob = pickle.dumps(original.snapshot())
    at_fork = (original._last_obs, original._last_info)
    rest = list(script[5:])
    expected = play(original, rest)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        restored, transcript = pool.submit(_restore_and_play, APPWORLD, blob, rest).result(timeout=600)
    assert restored == at_fork and transcript == expected


@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_appworld_branch_in_the_group_vector_env(appworld_trio, num_workers):
    task_id, script = _appworld_script()
    env = gym.make_vec(APPWORLD, num_envs=3, group_size=3, vectorization_mode="vector_entry_point",
                       split=None, max_steps=20, num_workers=num_workers)
    try:
        env.reset(seed=0, options={"task_id": task_id})
        for code in script[:7]:
            env.step([code] * 3)
        observations, infos = env.unwrapped.branch(0, [2, 1])
        assert observations == [env.unwrapped._obs[0]] * 2
        assert infos["_anchor"].tolist() == [False, True, True]
        results = []
        for code in script[7:]:
            obs, reward, terminated, truncated, infos = env.step([code] * 3)
            results.append((list(obs), reward.tolist(), terminated.tolist()))
        assert all(o[0] == o[1] == o[2] for o, _, _ in results)
        assert results[-1][1] == [10.0] * 3 and results[-1][2] == [True] * 3
    finally:
        env.close()
