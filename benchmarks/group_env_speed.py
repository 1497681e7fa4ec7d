"""Throughput of the group vector env: member steps per second, G × N members, in-process and in workers.

For an environment id, a single member (``gym.make``) and the group vector env
(``gym.make_vec(..., group_size=N)``) with ``num_workers`` 0 (in-process) and W worker processes are
stepped with random admissible actions until every member finished, repeatedly; the table reports
member steps per second, the speed-up of the group env over stepping one member, and reset time.

With ``--backend ray`` it also runs, on a local Ray instance (``--ray-cpus``), the group env with its W
slices as Ray actors (``backend="ray"``) and verl-agent's layout — one Ray actor per member, each
holding one member env of the same engine, stepped by one remote call per member — and reports the
ratio of the two and the number of processes each starts (Ray actor processes, counted by their pids).

Usage: ``python benchmarks/group_env_speed.py [--env Sokoban-Group-v0 --groups 16 --group-size 8 --workers 2]
[--backend ray]``. Writes ``benchmarks/results/group_env_speed/group_env_speed_<env>[_ray].md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import agentgym_credit  # noqa: E402, F401
from agentgym_credit.wrappers import member_info  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "group_env_speed"


def _random_action(rng: np.random.Generator, info: dict) -> str:
    acts = list(info.get("admissible_actions", [])) or ["<answer>unknown</answer>"]
    return acts[rng.integers(len(acts))]


def member_rate(env_id: str, seconds: float, seed: int) -> tuple[float, float]:
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    steps, resets, reset_time = 0, 0, 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        _, info = env.reset(seed=seed + resets)
        reset_time += time.perf_counter() - t0
        resets += 1
        done = False
        while not done:
            _, _, term, trunc, info = env.step(_random_action(rng, info))
            steps += 1
            done = term or trunc
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed, reset_time / resets


def group_rate(env_id: str, groups: int, size: int, workers: int, rounds: int, seed: int,
               report: dict[str, Any] | None = None, **backend: Any) -> tuple[float, float]:
    """Member steps/s and reset time; with the Ray backend ``report["processes"]`` counts its actor processes."""
    env = gym.make_vec(env_id, num_envs=groups * size, group_size=size, num_workers=workers,
                       vectorization_mode="vector_entry_point", **backend)
    rng = np.random.default_rng(seed)
    steps, reset_time = 0, 0.0
    start = time.perf_counter()
    for r in range(rounds):
        t0 = time.perf_counter()
        _, infos = env.reset(seed=seed + r * groups)
        reset_time += time.perf_counter() - t0
        while not env.unwrapped.finished.all():
            active = ~env.unwrapped.finished
            actions = [_random_action(rng, member_info(infos, i)) for i in range(env.num_envs)]
            _, _, _, _, infos = env.step(actions)
            steps += int(active.sum())
    elapsed = time.perf_counter() - start
    if report is not None and backend.get("backend") == "ray":
        report["processes"] = len({w.placement["pid"] for w in env.unwrapped._workers})
    env.close()
    return steps / elapsed, reset_time / rounds


def actor_per_member_rate(env_id: str, groups: int, size: int, rounds: int, seed: int,
                          num_cpus: float = 0.1) -> tuple[float, float, int]:
    """Member steps/s, reset time and process count of one actor per member (``num_cpus`` 0.1 as upstream).

    Each actor holds one member env of the same engine (the Ray backend's actor body with a slice of one),
    and every step is one remote call per active member, as in verl-agent's env manager.
    """
    import ray

    from agentgym_credit.envs.ray_backend import MemberSlice

    spec = gym.spec(env_id)
    actor_cls = ray.remote(MemberSlice).options(num_cpus=num_cpus)
    actors = [actor_cls.remote(spec.entry_point, dict(spec.kwargs), 1) for _ in range(groups * size)]
    processes = len({p["pid"] for p in ray.get([a.ready.remote() for a in actors])})
    rng = np.random.default_rng(seed)
    steps, reset_time = 0, 0.0
    start = time.perf_counter()
    for r in range(rounds):
        t0 = time.perf_counter()
        replies = ray.get([a.handle.remote("reset", [(0, seed + r * groups + i // size, {"group_id": i // size})])
                           for i, a in enumerate(actors)])
        infos = [reply[0][3] for reply in replies]
        reset_time += time.perf_counter() - t0
        live = list(range(len(actors)))
        while live:
            out = ray.get([actors[i].handle.remote("step", [(0, _random_action(rng, infos[i]))]) for i in live])
            steps += len(live)
            done = []
            for i, ((_, _, _, term, trunc, info),) in zip(live, out, strict=True):
                infos[i] = info
                done.append(term or trunc)
            live = [i for i, d in zip(live, done, strict=True) if not d]
    elapsed = time.perf_counter() - start
    for a in actors:
        ray.kill(a)
    return steps / elapsed, reset_time / rounds, processes


def ray_rows(args: argparse.Namespace) -> list[dict]:
    """The Ray rows: W slice actors (``backend="ray"``) and one actor per member, on a local Ray instance."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
    try:
        n = args.groups * args.group_size
        backend: dict[str, Any] = {"backend": "ray", "backend_options": {"num_cpus": args.ray_cpus / args.workers}}
        report: dict[str, Any] = {}
        rate, reset_s = group_rate(args.env, args.groups, args.group_size, args.workers, args.rounds, args.seed,
                                   report, **backend)
        rows = [{"setting": f"group {args.groups}×{args.group_size}, Ray: {args.workers} actors holding slices",
                 "steps_per_s": rate, "reset_s": reset_s, "processes": report["processes"]}]
        # upstream reserves 0.1 CPU per env actor; less when the local instance could not hold them all
        rate_m, reset_m, procs = actor_per_member_rate(args.env, args.groups, args.group_size, args.rounds, args.seed,
                                                       num_cpus=min(0.1, args.ray_cpus / n))
        rows.append({"setting": f"group {args.groups}×{args.group_size}, Ray: one actor per member ({n}, verl-agent)",
                     "steps_per_s": rate_m, "reset_s": reset_m, "processes": procs})
        return rows
    finally:
        if started:
            ray.shutdown()


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--env", default="Sokoban-Group-v0")
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--member-seconds", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--backend", choices=["process", "ray"], default="process",
                    help="ray: add the Ray rows (slices as actors, and one actor per member)")
    ap.add_argument("--ray-cpus", type=float, default=2.0, help="CPUs of the local Ray instance")
    args = ap.parse_args(argv)
    rows = []
    load_start = os.getloadavg()[0]
    rate, reset_s = member_rate(args.env, args.member_seconds, args.seed)
    rows.append({"setting": "member (gym.make)", "steps_per_s": rate, "reset_s": reset_s})
    for w in tqdm(sorted({0, args.workers}), desc="group env"):
        rate_g, reset_g = group_rate(args.env, args.groups, args.group_size, w, args.rounds, args.seed)
        label = f"group {args.groups}×{args.group_size}, " + ("in-process" if w == 0 else f"{w} workers")
        rows.append({"setting": label, "steps_per_s": rate_g, "reset_s": reset_g, "processes": 1 + w})
    rows[0]["processes"] = 1
    if args.backend == "ray":
        rows.extend(ray_rows(args))
    base = rows[0]["steps_per_s"]
    lines = ["| setting | member steps/s | × member | reset (s) | processes |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        procs = r["processes"] if r["setting"].startswith(("member", "group")) and "Ray" not in r["setting"] \
            else f"{r['processes']} actors + driver"
        lines.append(f"| {r['setting']} | {r['steps_per_s']:,.0f} | {r['steps_per_s'] / base:.2f} | "
                     f"{r['reset_s']:.4f} | {procs} |")
    table = "\n".join(lines)
    if args.backend == "ray":
        ratio = rows[-2]["steps_per_s"] / rows[-1]["steps_per_s"]
        table += (f"\n\nRay slices / one actor per member: {ratio:.2f}× the member steps/s with "
                  f"{rows[-2]['processes']} instead of {rows[-1]['processes']} actor processes.")
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "_ray" if args.backend == "ray" else ""
    path = args.out / f"group_env_speed_{args.env.split('-')[0].lower()}{suffix}.md"
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    path.write_text(f"{args.env}, random admissible actions, seed {args.seed}, {args.rounds} rounds, "
                    f"{args.member_seconds} s of member stepping; measured {date} on {os.cpu_count()} cores shared "
                    f"with other jobs (load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the "
                    f"end).\n\n{table}\n")
    print(f"written to {path}")
    return rows


if __name__ == "__main__":
    main()
