"""AppWorld speed before and after the agent sandbox: reset and step times of one member and of a group.

Every measured step is a scripted-solution code step of a shipped task (logins, searches, payments, notes),
so the figures include real API calls into the AppWorld app engine. Three code versions run the same
tasks, one after the other on the same machine:

* **before**: the env as it was before the agent sandbox (``--baseline-ref``, default ``8f7a169``: agent
  code in a forked child of the engine that also holds the databases, reused across resets), extracted
  with ``git archive`` and run in a subprocess;
* **after, sandboxed**: the env as it is (a fresh world server per episode, forked from the clean
  template; the agent's REPL in its own process under bubblewrap + seccomp);
* **after, unsafe_no_sandbox**: the same without bubblewrap and seccomp (the REPL still a separate
  process): the difference to "sandboxed" is what the wall itself costs.

Measured for each: engine start (the template loading the apps), one ``AppWorldEnv`` member (reset =
a new world + REPL; steps/s over the solutions), the median latency of a trivial step (``print(1)``)
and of a one-API-call step, and a group vector env (``G×N`` members in lockstep, in-process).
For the sandbox alone: the time to start an agent REPL process with and without the wall (spawn to
ready: bwrap, Python, the preamble's imports, the limits, the seccomp filter).

Prints a Markdown table with ratios (after ÷ before) and writes it to
``benchmarks/results/appworld_speed/appworld_speed.md``.

Usage: ``python -m benchmarks.appworld_speed [--tasks 10] [--groups 2] [--members 4] [--baseline-ref REF]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "appworld_speed" / "appworld_speed.md"
ROOT = Path(__file__).resolve().parent.parent
BASELINE_REF = "8f7a169"  # the last commit before the agent sandbox


def _tasks(count: int) -> list:
    from agentgym_credit.envs.appworld.tasks import load_tasks

    train = list(load_tasks(split="train"))
    return train[:: max(1, len(train) // count)][:count]


def _make_env(unsafe: bool):
    from agentgym_credit.envs.appworld.env import AppWorldEnv

    return AppWorldEnv(split=None, **({"unsafe_no_sandbox": True} if unsafe else {}))


def _median_ms(samples: list[float]) -> float:
    return 1000.0 * statistics.median(samples)


def _member(tasks, unsafe: bool) -> dict:
    env = _make_env(unsafe)
    resets, steps, step_time = [], 0, 0.0
    try:
        for seed_task in {t.world_seed: t for t in tasks}.values():  # every world built or cached beforehand
            env.reset(options={"task_id": seed_task.task_id})
        for task in tasks:
            start = time.perf_counter()
            env.reset(options={"task_id": task.task_id})
            resets.append(time.perf_counter() - start)
            start = time.perf_counter()
            for code in task.solution:
                env.step(code)
            step_time += time.perf_counter() - start
            steps += len(task.solution)
        env.reset(options={"task_id": tasks[0].task_id})
        trivial, api = [], []
        for _ in range(30):
            start = time.perf_counter()
            env.step("print(1)")
            trivial.append(time.perf_counter() - start)
            start = time.perf_counter()
            env.step("print(apis.supervisor.show_profile()['first_name'])")
            api.append(time.perf_counter() - start)
    finally:
        env.close()
    return {
        "reset_s": float(np.mean(resets)),
        "steps_per_s": steps / step_time,
        "trivial_step_ms": _median_ms(trivial),
        "api_step_ms": _median_ms(api),
    }


def _group(tasks, groups: int, members: int, unsafe: bool) -> dict:
    import gymnasium as gym

    import agentgym_credit  # noqa: F401 - registers the environments

    extra = {"unsafe_no_sandbox": True} if unsafe else {}
    vec = gym.make_vec(
        "AppWorld-Group-v0",
        num_envs=groups * members,
        vectorization_mode="vector_entry_point",
        group_size=members,
        split="train",
        **extra,
    )
    resets, steps, step_time = [], 0, 0.0
    try:
        vec.reset(seed=0)
        for task in tasks:  # every member plays the task (the same steps as the member run)
            start = time.perf_counter()
            vec.reset(seed=0, options={"task_id": task.task_id})
            resets.append(time.perf_counter() - start)
            start = time.perf_counter()
            for code in task.solution:
                vec.step([code] * (groups * members))
                steps += groups * members
            step_time += time.perf_counter() - start
    finally:
        vec.close()
    return {"group_reset_s": float(np.mean(resets)), "group_steps_per_s": steps / step_time}


def _engine_start() -> float:
    from agentgym_credit.envs.appworld.engine import EngineProcess, appworld_venv_dir

    start = time.perf_counter()
    engine = EngineProcess(appworld_venv_dir())
    seconds = time.perf_counter() - start
    engine.stop()
    return seconds


def measure(count: int, groups: int, members: int, unsafe: bool) -> dict:
    """Every figure of one code version (the one ``agentgym_credit`` imports from)."""
    tasks = _tasks(count)
    return {
        "engine_start_s": _engine_start(),
        **_member(tasks, unsafe),
        **_group(tasks, groups, members, unsafe),
    }


def repl_start(sandboxed: bool, repeats: int = 10) -> float:
    """Median seconds from spawning an agent REPL process to its ready (set-up behind the wall)."""
    from agentgym_credit.envs.appworld.engine import appworld_venv_dir
    from agentgym_credit.envs.appworld.sandbox import AgentProcess, probe_sandbox

    if sandboxed:
        probe_sandbox(appworld_venv_dir())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        agent = AgentProcess(appworld_venv_dir(), sandboxed=sandboxed, memory_mb=1024, cpu_seconds=600)
        agent.start({"supervisor": ["show_profile"]})
        samples.append(time.perf_counter() - start)
        agent.close()
    return statistics.median(samples)


def _before(ref: str, count: int, groups: int, members: int) -> tuple[dict, str]:
    """The figures of the code at ``ref`` (extracted with ``git archive``, run in a subprocess)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="agc-appworld-before-") as tree:
        archive = subprocess.run(
            ["git", "archive", ref, "agentgym_credit"], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        out = Path(tree) / "figures.json"
        env = dict(os.environ, PYTHONPATH=tree)
        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--measure-only",
                str(out),
                "--tasks",
                str(count),
                "--groups",
                str(groups),
                "--members",
                str(members),
            ],
            env=env,
            cwd=tree,
            check=True,
        )
        return json.loads(out.read_text()), commit


ROWS = (
    ("engine start (template loads the apps), s", "engine_start_s", "{:.1f}"),
    ("member reset, s (mean)", "reset_s", "{:.3f}"),
    ("member steps/s (scripted solutions)", "steps_per_s", "{:.1f}"),
    ("step latency `print(1)`, ms (median)", "trivial_step_ms", "{:.2f}"),
    ("step latency, one API call, ms (median)", "api_step_ms", "{:.2f}"),
    ("group reset, s (mean, whole group)", "group_reset_s", "{:.3f}"),
    ("group steps/s (member steps)", "group_steps_per_s", "{:.1f}"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--tasks", type=int, default=10, help="train tasks played in every setting")
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument(
        "--baseline-ref", default=BASELINE_REF, help="the code before the sandbox (a git ref)"
    )
    parser.add_argument(
        "--measure-only", default=None, help=argparse.SUPPRESS
    )  # the subprocess of the baseline
    args = parser.parse_args()
    if args.measure_only:
        Path(args.measure_only).write_text(json.dumps(measure(args.tasks, args.groups, args.members, False)))
        return

    load_before = os.getloadavg()[0]
    before, commit = _before(args.baseline_ref, args.tasks, args.groups, args.members)
    sandboxed = measure(args.tasks, args.groups, args.members, unsafe=False)
    unsafe = measure(args.tasks, args.groups, args.members, unsafe=True)
    start_walled, start_plain = repl_start(True), repl_start(False)
    load_after = os.getloadavg()[0]

    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    load = f"load average, 1 min: {load_before:.1f} at the start, {load_after:.1f} at the end"
    group = f"{args.groups}×{args.members}"
    header = ["figure", "before", "after, sandboxed", "after, unsafe_no_sandbox", "sandboxed ÷ before",
              "sandboxed ÷ unsafe"]
    lines = [
        "# AppWorld speed: before and after the agent sandbox",
        "",
        f"Machine: {machine}, shared with other jobs while measured ({load}), so the figures are under "
        f"contention. Steps are the scripted-solution code steps of {args.tasks} train tasks of all "
        f"difficulties, the same in every column; the group is {group} members in lockstep in one process "
        "(a group reset puts every member on the task). Before: the code at "
        f"`{commit}` (agent code in a forked child of the engine that also holds the databases, reused "
        "across resets). After: a new world server (a fork of the clean template) and a new REPL process per "
        "episode; sandboxed = the REPL under bubblewrap + seccomp (the default), unsafe = "
        "`unsafe_no_sandbox=True`.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for name, key, fmt in ROWS:
        b, s, u = before[key], sandboxed[key], unsafe[key]
        lines.append(
            f"| {name} | {fmt.format(b)} | {fmt.format(s)} | {fmt.format(u)} | {s / b:.2f} | {s / u:.2f} |"
        )
    wall_ms = 1000 * (start_walled - start_plain)
    command = (f"--tasks {args.tasks} --groups {args.groups} --members {args.members} "
               f"--baseline-ref {args.baseline_ref}")
    lines += [
        "",
        f"Agent REPL process start to ready (median of 10): {1000 * start_walled:.0f} ms with bubblewrap + "
        f"seccomp, {1000 * start_plain:.0f} ms without (the wall: {wall_ms:+.0f} ms per REPL). An env starts "
        "the next episode's REPL when an episode ends, so a reset after a finished episode does not wait "
        "for it.",
        "",
        f"Command: `python -m benchmarks.appworld_speed {command}`",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
