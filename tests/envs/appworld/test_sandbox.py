"""The agent's sandbox: Python-level refusals, time limits, the probe, the process limits, the unsafe opt-out.

The attacks that get past the Python-level checks and meet the operating-system wall are in
``test_attacks.py``.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import pytest

import agentgym_credit  # noqa: F401 - registers the environments
from agentgym_credit.envs.appworld import agent_worker, sandbox
from agentgym_credit.envs.appworld.engine import (
    APPWORLD_REQUIREMENT,
    READY_STAMP,
    REQUIREMENTS,
    SECCOMP_REQUIREMENT,
    missing_requirements,
)
from agentgym_credit.envs.appworld.env import AppWorldEnv
from agentgym_credit.envs.appworld.sandbox import AgentLost, AgentProcess, SandboxUnavailable, probe_sandbox
from agentgym_credit.envs.appworld.scenarios import LOGIN

VIOLATIONS = {
    "read /etc/passwd": "print(open('/etc/passwd').read())",
    "open a socket": "import socket\ns = socket.socket()",
    "import subprocess": "import subprocess\nsubprocess.run(['id'])",
    "import os": "import os\nprint(os.listdir('/'))",
    "import ctypes": "from ctypes import CDLL",
    "os through a private module attribute": "import random\nrandom._os.system('id')",
    "os through a public module attribute": "import pendulum\npendulum.helpers.os.system('id')",
    "sys through a module attribute": "import calendar\ncalendar.sys.modules['posix'].system('id')",
    "attribute lookup by name": "import calendar\nprint(getattr(calendar, 'sys'))",
    "builtins escape": "print(().__class__.__bases__[0].__subclasses__())",
    "import via __import__": "print(__import__('os'))",
    "allocate 10 GB": "x = bytearray(10 * 1024 ** 3)",
    "allocate a 10 GB list": "x = [0] * (10 * 1024 ** 3 // 8)",
}


@pytest.fixture(scope="module")
def member(appworld_venv):
    """One member whose REPL must survive every violation in turn."""
    env = AppWorldEnv(split=None, step_seconds=2.0)
    task = next(t for t in env.tasks if t.template == "venmo_balance")
    env.reset(options={"task_id": task.task_id})
    _, _, _, _, info = env.step(LOGIN + "\nkept = 41")
    assert not info["execution_error"]
    yield env
    env.close()


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_violation_is_an_error_observation_and_the_repl_survives(member, name) -> None:
    observation, reward, terminated, truncated, info = member.step(VIOLATIONS[name])
    assert observation.startswith("Execution failed"), observation
    assert "root:" not in observation and "uid=" not in observation
    assert info["execution_error"] and not terminated and reward == 0.0
    observation, *_ = member.step("print(kept + 1, list(passwords))")
    accounts = ["venmo", "simple_note", "phone", "spotify", "file_system", "todoist", "splitwise"]
    assert observation.strip() == f"42 {accounts}"


def test_infinite_loop_hits_the_step_time_limit_and_other_members_keep_working(make_env, member) -> None:
    observation, _, terminated, _, info = member.step("while True:\n    pass")
    assert "timed out after 2 seconds" in observation and not terminated
    other = make_env()
    task = other.tasks[0]
    other.reset(options={"task_id": task.task_id})
    observation, *_ = other.step("print(1 + 1)")
    assert observation.strip() == "2"
    observation, *_ = member.step("try:\n    while True:\n        pass\nexcept Exception:\n    print('caught')")
    assert "timed out" in observation  # the timeout is not an Exception the agent can swallow
    assert member.step("print(kept)")[0].strip() == "41"


def test_long_output_is_truncated_to_the_documented_length(make_env) -> None:
    env = make_env(output_chars=500)
    env.reset(options={"task_id": env.tasks[0].task_id})
    observation, *_ = env.step("print('x' * 100000)")
    assert observation.startswith("x" * 500) and "[output truncated: " in observation
    assert len(observation) < 600


@pytest.mark.parametrize(
    ("event", "args"),
    [("os.system", (b"id",)), ("open", ("/etc/passwd", "r", 0)), ("socket.connect", (None, ("1.1.1.1", 80))),
     ("subprocess.Popen", ("id", ["id"], None, None)), ("os.scandir", ("/",)), ("import", ("ctypes",))],
)
def test_audit_hook_refuses_host_access_while_agent_code_runs(event, args) -> None:
    """The audit hook (defence in depth behind the wall): events raised from inside agent code are refused."""
    agent_worker._audit(event, args)  # not armed: the worker's own set-up may do anything
    agent_worker._AGENT_RUNNING[0] = True
    try:
        with pytest.raises(agent_worker.SandboxViolation):
            agent_worker._audit(event, args)
        agent_worker._audit("import", ("json",))  # lazily imported helpers of allowed modules pass
    finally:
        agent_worker._AGENT_RUNNING[0] = False


def test_the_probe_passes_here_and_a_missing_bubblewrap_refuses_to_start(
    appworld_venv, monkeypatch, tmp_path
) -> None:
    assert probe_sandbox(appworld_venv) > 10 * 1024 * 1024  # the worker's measured address space
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on the PATH
    missing = r"bubblewrap \(bwrap\) is not installed.*apt-get install bubblewrap"
    with pytest.raises(SandboxUnavailable, match=missing):
        probe_sandbox(appworld_venv)
    with pytest.raises(SandboxUnavailable, match="unsafe_no_sandbox=True"):
        AppWorldEnv(split=None)
    with pytest.raises(SandboxUnavailable):
        gym.make("AppWorld-Group-v0")
    # the opt-out, for trusted code: the REPL is still a separate process from its world server
    env = gym.make("AppWorld-Group-v0", unsafe_no_sandbox=True).unwrapped
    try:
        task = env.tasks[0]
        env.reset(options={"task_id": task.task_id})
        observation, *_ = env.step("print(1 + 1)")
        assert observation.strip() == "2" and env.unsafe_no_sandbox
        assert env._agent.pid != env._world.world_pid and not env._agent.sandboxed
    finally:
        env.close()


def test_a_venv_without_pyseccomp_fails_the_probe(appworld_venv, tmp_path) -> None:
    """The probe runs the real filter: without pyseccomp in the venv, the env would refuse to start."""
    fake = tmp_path / "venv"
    site = sorted((appworld_venv / "lib").glob("python3.*/site-packages"))[-1]
    fake_site = fake / site.relative_to(appworld_venv)
    fake_site.mkdir(parents=True)
    (fake / "bin").mkdir()
    (fake / "bin" / "python").symlink_to(os.path.realpath(appworld_venv / "bin" / "python"))
    for name in sandbox.SITE_PACKAGES:
        if name != "pyseccomp.py":
            (fake_site / name).symlink_to(site / name)
    (fake_site / "pyseccomp.py").write_text("raise ImportError('pyseccomp is not installed')\n")
    with pytest.raises(SandboxUnavailable, match="pyseccomp is not installed"):
        probe_sandbox(fake)


def test_the_venv_stamp_names_every_requirement(appworld_venv) -> None:
    assert missing_requirements(f"{APPWORLD_REQUIREMENT}\n") == [SECCOMP_REQUIREMENT]  # a venv set up before
    assert missing_requirements("\n".join(REQUIREMENTS)) == []
    assert missing_requirements("") == list(REQUIREMENTS)
    # the set-up brought the shared venv up to date: pyseccomp is installed and stamped
    assert missing_requirements((appworld_venv / READY_STAMP).read_text()) == []
    layout = sandbox.sandbox_layout(str(appworld_venv))
    assert os.path.exists(os.path.join(layout.site_packages, "pyseccomp.py"))


def test_the_process_limits_hold_cpu_and_memory(appworld_venv) -> None:
    """RLIMIT_CPU ends a REPL that spends its CPU budget; RLIMIT_AS makes a large allocation a MemoryError."""
    agent = AgentProcess(appworld_venv, sandboxed=True, memory_mb=64, cpu_seconds=1)
    try:
        agent.start({"supervisor": ["show_profile"]})
        reply = agent.execute("x = bytearray(200 * 1024 * 1024)", 5.0, None)
        assert reply["error"] and "MemoryError" in reply["output"]
        assert agent.execute("print(sum(range(10)))", 5.0, None) == {"output": "45\n", "error": False}
        started = time.monotonic()
        with pytest.raises(AgentLost) as lost:
            agent.execute("while True:\n    pass", 30.0, None)  # SIGXCPU after 1 s of CPU
        assert lost.value.reason == "ended" and time.monotonic() - started < 20
        assert not agent.alive()
    finally:
        agent.close()


def _worker_processes() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if str(sandbox.WORKER_SCRIPT).encode() in handle.read():
                        found.add(int(entry))
            except OSError:
                continue
    return found


def test_a_repl_closed_while_it_starts_leaves_nothing(appworld_venv) -> None:
    """Killing a REPL at once (bwrap still setting its namespaces up) takes every process it made with it."""
    before = _worker_processes()
    for _ in range(20):
        AgentProcess(appworld_venv, sandboxed=True, memory_mb=64, cpu_seconds=10).close()
    deadline = time.monotonic() + 10
    while _worker_processes() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _worker_processes() - before
