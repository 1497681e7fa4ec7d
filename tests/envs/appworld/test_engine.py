"""The engine process: shared between members, restarted after it dies, deterministic worlds."""

from __future__ import annotations

import base64
import os
import signal
import zlib
from pathlib import Path

import pytest

from agentgym_credit.envs.appworld import engine_server
from agentgym_credit.envs.appworld.engine import EngineError, WorldConnection, shared_engine
from agentgym_credit.envs.appworld.oracle import play
from agentgym_credit.envs.appworld.scenarios import LOGIN


def test_members_share_one_engine_and_a_killed_engine_is_restarted(make_env) -> None:
    first, second = make_env(), make_env()
    task = first.tasks[0]
    first.reset(options={"task_id": task.task_id})
    second.reset(options={"task_id": task.task_id})
    engine = first._world.engine
    assert second._world.engine is engine and engine.alive()
    first.step(LOGIN)

    os.killpg(engine.pid, signal.SIGKILL)  # the engine and every world in it
    engine.process.wait(10)
    observation, reward, terminated, truncated, info = first.step("print(passwords)")
    assert terminated and reward == 0.0 and not info["action_valid"] and info["engine_lost"]
    assert "AppWorld engine stopped" in observation and info["task_id"] == task.task_id

    # the next episode starts a fresh engine and works, for both members
    assert play(first, task)["won"]
    assert first._world.engine is not engine and first._world.engine.alive()
    assert play(second, task)["won"]


def test_same_seed_same_world_and_same_transcript(make_env, appworld_venv) -> None:
    engine = shared_engine(appworld_venv)
    opened = []

    def world(seed: int, fresh: bool = False) -> tuple[WorldConnection, dict, str]:
        connection = WorldConnection(engine)  # every world is a new fork of the template
        opened.append(connection)
        summary = connection.build(seed, "x", fresh=fresh)["summary"]
        return connection, summary, connection.request("fingerprint")["sha256"]

    try:
        _, built, built_print = world(105, fresh=True)  # built by a fresh fork and cached on disk
        cached_world, cached, cached_print = world(105)  # loaded from the cache
        _, rebuilt, rebuilt_print = world(105, fresh=True)
        assert built == cached == rebuilt and built_print == cached_print == rebuilt_print
        _, other, other_print = world(104)
        assert other["people"] != built["people"] and other_print != built_print
        # the fingerprint covers the other apps' rows too
        for app, key in (("spotify", "songs"), ("file_system", "files"), ("splitwise", "groups")):
            assert built[app][key], app
        assert built["todoist"]["projects"][1]["tasks"]
        assert len(built["text_messages"]) == 10
        def call(app: str, api: str, **kwargs):  # API calls of the client's own, on the cached world
            return cached_world.request("call", app=app, api=api, kwargs=kwargs)["result"]

        email = call("supervisor", "show_profile")["email"]
        password = next(p["password"] for p in call("supervisor", "show_account_passwords")
                        if p["account_name"] == "spotify")
        token = call("spotify", "login", username=email, password=password)["access_token"]
        call("spotify", "like_song", song_id=1, access_token=token)
        assert cached_world.request("fingerprint")["sha256"] != cached_print
        assert opened[0].request("fingerprint")["sha256"] == built_print  # another world: untouched
        with pytest.raises(EngineError, match="already built"):
            cached_world.build(104, "x")  # one world per world server
    finally:
        for connection in opened:
            connection.close()

    env = make_env()
    task = next(t for t in env.tasks if t.template == "pay_relationship")
    runs = [play(env, task) for _ in range(2)]
    transcripts = [[obs for obs, _ in run["transcript"]] for run in runs]
    assert runs[0]["won"] and runs[1]["won"] and transcripts[0] == transcripts[1]


def test_a_saved_world_loads_into_another_world_of_its_task(appworld_venv) -> None:
    """``save`` / ``load`` (a fork's world): the rows, the random state ``login`` draws from and the
    logged-out tokens; the diff stays against the task's own start; a malformed save changes nothing."""
    engine = shared_engine(appworld_venv)
    first, second = WorldConnection(engine), WorldConnection(engine)
    try:
        for world in (first, second):
            world.build(101, "x")

        def call(world: WorldConnection, app: str, api: str, **kwargs):
            return world.request("call", app=app, api=api, kwargs=kwargs)["result"]

        email = call(first, "supervisor", "show_profile")["email"]
        password = next(p["password"] for p in call(first, "supervisor", "show_account_passwords")
                        if p["account_name"] == "spotify")
        revoked = call(first, "spotify", "login", username=email, password=password)["access_token"]
        call(first, "spotify", "logout", access_token=revoked)
        token = call(first, "spotify", "login", username=email, password=password)["access_token"]
        call(first, "spotify", "like_song", song_id=1, access_token=token)
        saved = first.request("save")
        assert set(saved["images"]) == set(engine_server.WORLD_APPS)
        assert saved["tokens"] == {"spotify": [revoked]}
        second.request("load", images=saved["images"], random=saved["random"], tokens=saved["tokens"])
        assert second.request("fingerprint")["sha256"] == first.request("fingerprint")["sha256"]
        assert second.request("digest")["sha256"] == first.request("digest")["sha256"]
        assert second.request("diff")["changes"] == first.request("diff")["changes"] != {}
        assert call(second, "spotify", "login", username=email, password=password) == call(
            first, "spotify", "login", username=email, password=password)  # the same token: same random state
        assert second.request("digest")["sha256"] == first.request("digest")["sha256"]
        assert second.request("save")["tokens"] == saved["tokens"]  # the logged-out token, revoked in both
        fingerprint = second.request("fingerprint")["sha256"]
        junk = base64.b64encode(zlib.compress(b"not a database" * 100)).decode()
        for fields, message in (
            ({**saved, "images": {"venmo": saved["images"]["venmo"]}}, "one image for each"),
            ({**saved, "images": {**saved["images"], "venmo": junk}}, "not a SQLite database"),
            ({**saved, "random": [3, [1, 2], None]}, "random state is malformed"),
            ({**saved, "tokens": {"nope": ["x"]}}, "logged-out tokens"),
        ):
            with pytest.raises(EngineError, match=message):
                second.request("load", **fields)
        assert second.request("fingerprint")["sha256"] == fingerprint  # nothing changed
    finally:
        first.close()
        second.close()


def test_a_world_server_runs_under_the_kernel_s_memory_and_cpu_limits(appworld_venv) -> None:
    """What the agent's API calls can cost the world is capped by the kernel, not only by the per-step checks."""
    engine = shared_engine(appworld_venv)
    world = WorldConnection(engine)
    try:
        world.build(101, "x")
        limits = Path(f"/proc/{world.world_pid}/limits").read_text()
        cpu = next(line.split() for line in limits.splitlines() if line.startswith("Max cpu time"))
        assert cpu[3:5] == [str(engine_server.WORLD_CPU_SECONDS)] * 2  # soft = hard
        memory = next(line.split() for line in limits.splitlines() if line.startswith("Max address space"))
        assert memory[3] == memory[4] != "unlimited"
    finally:
        world.close()
