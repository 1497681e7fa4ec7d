"""Fork cost per environment: snapshot + restore (native) against a replay of the episode, and ``branch()``.

For each environment a member plays a seeded episode with random non-terminal actions (admissible ones where
the environment lists them) to a few depths; at each depth the script times, median of ``--repeats``:

* ``snapshot()`` and the size of the pickled snapshot;
* ``restore(snapshot)`` into another member: the environment's own fork method (native for Sokoban, WebShop,
  SearchQA and AppWorld; a replay for ALFWorld, whose restore *is* the replay);
* the replay of the same snapshot — reset with its recorded arguments and ``np_random`` state, then its
  actions stepped again, checked against its observation — which is how any member forks without a native
  snapshot; the ratio replay / restore is what the native snapshot saves;
* ``GroupVectorEnv.branch(parent, children)`` of a group of ``--group-size`` members at one depth, in-process,
  with 2 worker processes and with 2 Ray actors (a child on the parent's worker and the others on the other
  one, so the snapshot crosses a pipe or the Ray object store).

AppWorld's steps are code (``appworld_action``: the log-in, then Venmo pages read into REPL variables); its
member and branch timings start world servers and sandboxed REPLs, so they are run on their own, into their
own folder: ``--envs appworld --out benchmarks/results/fork_speed/appworld``.

Usage: ``python benchmarks/fork_speed.py [--envs sokoban webshop searchqa alfworld appworld] [--depths 0 5 10
20] [--repeats 20] [--no-ray] [--out DIR]``. Writes ``benchmarks/results/fork_speed/fork_speed.{md,json}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import agentgym_credit  # noqa: E402, F401
from agentgym_credit.envs.base import GroupMemberEnv  # noqa: E402
from agentgym_credit.machine import machine_summary  # noqa: E402
from benchmarks.credit_overhead import _git_commit  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "fork_speed"

#: Environment id and member settings: episodes long enough for the deepest fork.
ENVS: dict[str, tuple[str, dict[str, Any]]] = {
    "sokoban": ("Sokoban-Group-v0", {"max_steps": 50}),
    "webshop": ("WebShop-Group-v0", {"max_steps": 50}),
    "searchqa": ("SearchQA-Group-v0", {"max_steps": 40}),
    "alfworld": ("ALFWorld-Group-v0", {"max_steps": 50}),
    "appworld": ("AppWorld-Group-v0", {"max_steps": 50}),
}
_TERMINAL = {"click[buy now]"}
#: AppWorld's steps: log in, then read Venmo pages and keep what they hold in REPL variables (one more each).
_APPWORLD_OPENING = (
    "profile = apis.supervisor.show_profile()\n"
    "passwords = {p['account_name']: p['password'] for p in apis.supervisor.show_account_passwords()}",
    "token = apis.venmo.login(username=profile['email'], password=passwords['venmo'])['access_token']\n"
    "seen = {}",
)


def appworld_action(step: int) -> str:
    """AppWorld's ``step``-th code step: the log-in, then a Venmo page read into the REPL's variables."""
    if step < len(_APPWORLD_OPENING):
        return _APPWORLD_OPENING[step]
    page = step - len(_APPWORLD_OPENING)
    return (f"page = apis.venmo.show_transactions(access_token=token, page_index={page % 8}, page_limit=5)\n"
            f"seen[{page}] = [t['amount'] for t in page]\nprint(len(seen), sum(map(sum, seen.values())))")


def non_terminal_action(info: dict[str, Any], rng: np.random.Generator) -> str:
    """A random action that does not end the episode on purpose (no purchase, no answer)."""
    admissible = [a for a in info["admissible_actions"] if a not in _TERMINAL]
    words = str(info["task"]).split() or ["query"]
    if not admissible:  # SearchQA: a search for words of the question
        return f"<search>{' '.join(rng.choice(words, size=min(3, len(words)), replace=False))}</search>"
    action = str(rng.choice(admissible))
    return f"search[{' '.join(words[2:6])}]" if action == "search[...]" else action


def play_to(env: GroupMemberEnv, depth: int, seed: int) -> list[str]:
    """Reset ``env`` and step ``depth`` random non-terminal actions; a seed whose episode ends early is skipped.

    Returns:
        The actions played.
    """
    for attempt in range(50):
        rng = np.random.default_rng(seed + attempt)
        _, info = env.reset(seed=seed + attempt)
        actions = []
        for _ in range(depth):
            code = type(env).__name__ == "AppWorldEnv"
            actions.append(appworld_action(len(actions)) if code else non_terminal_action(info, rng))
            *_, info = env.step(actions[-1])
            if env.episode_over:
                break
        if not env.episode_over:
            return actions
    raise RuntimeError(f"no episode of {type(env).__name__} lasted {depth} steps in 50 seeds")


#: How to empty an environment's search cache (results are cached per query in the process, so a replay in
#: the process that played the episode finds its searches cached; in another process it runs them again).
SEARCH_CACHES: dict[str, Callable[[Any], None]] = {
    "webshop": lambda env: env.search_index._cache.clear(),
    "searchqa": lambda env: env.retriever._query_cache.clear(),
}


def median_seconds(fn: Callable[[], Any], repeats: int, setup: Callable[[], Any] | None = None) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls (``setup`` runs before each, untimed)."""
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def member_rows(name: str, depths: list[int], repeats: int, seed: int) -> list[dict[str, Any]]:
    """Snapshot, restore and replay times of one environment at each depth."""
    env_id, kwargs = ENVS[name]
    parent, child = gym.make(env_id, **kwargs).unwrapped, gym.make(env_id, **kwargs).unwrapped
    rows = []
    try:
        for depth in depths:
            play_to(parent, depth, seed)
            snap = parent.snapshot()
            blob = pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL)
            child.restore(snap)  # warm: the child holds the same game / room afterwards, as in a rollout
            snapshot_s = median_seconds(parent.snapshot, repeats)
            pickle_s = median_seconds(lambda snap=snap: pickle.loads(pickle.dumps(snap)), repeats)
            restore_s = median_seconds(lambda snap=snap: child.restore(snap), repeats)
            replay_only = dataclasses.replace(snap, state=None)  # reset + actions, nothing copied
            replay_s = median_seconds(lambda snap=replay_only: child._replay(snap), repeats)
            cold_s = None
            if name in SEARCH_CACHES:
                cold_s = median_seconds(lambda snap=replay_only: child._replay(snap), repeats,
                                        setup=lambda: SEARCH_CACHES[name](child))
            assert child._last_obs == parent._last_obs and child.action_history == parent.action_history
            rows.append({
                "env": env_id, "method": snap.method, "depth": depth, "snapshot_ms": 1e3 * snapshot_s,
                "pickled_kb": len(blob) / 1024, "pickle_round_trip_ms": 1e3 * pickle_s,
                "restore_ms": 1e3 * restore_s, "replay_ms": 1e3 * replay_s, "replay_over_restore": replay_s / restore_s,
                "replay_cold_search_ms": None if cold_s is None else 1e3 * cold_s,
                "fork_ms": 1e3 * (snapshot_s + restore_s),
            })
    finally:
        parent.close()
        child.close()
    return rows


def branch_rows(name: str, depth: int, group_size: int, repeats: int, seed: int,
                ray_cpus: float | None) -> list[dict[str, Any]]:
    """``branch(0, [1 .. N-1])`` at ``depth`` in-process, with 2 worker processes and with 2 Ray actors."""
    env_id, kwargs = ENVS[name]
    backends: list[tuple[str, dict[str, Any]]] = [("in-process", {}), ("2 worker processes", {"num_workers": 2})]
    if ray_cpus:
        backends.append(("2 Ray actors", {"num_workers": 2, "backend": "ray",
                                          "backend_options": {"num_cpus": ray_cpus / 2}}))
    probe = gym.make(env_id, **kwargs).unwrapped
    actions = play_to(probe, depth, seed)
    start_seed = int(probe.snapshot().reset.seed)
    probe.close()
    rows = []
    for label, backend in backends:
        env = gym.make_vec(env_id, num_envs=group_size, group_size=group_size,
                           vectorization_mode="vector_entry_point", **kwargs, **backend)
        try:
            env.reset(seed=start_seed)
            for action in actions:
                env.step([action] * group_size)
            children = list(range(1, group_size))
            env.unwrapped.branch(0, children)  # warm (ALFWorld: every member has compiled the game)
            branch_s = median_seconds(lambda env=env, kids=children: env.unwrapped.branch(0, kids), repeats)
            obs = env.unwrapped._obs
            assert all(obs[c] == obs[0] for c in children)
        finally:
            env.close()
        rows.append({"env": env_id, "backend": label, "depth": depth, "children": group_size - 1,
                     "branch_ms": 1e3 * branch_s})
    base = rows[0]["branch_ms"]
    for row in rows:
        row["over_in_process"] = row["branch_ms"] / base
    return rows


def _tables(members: list[dict[str, Any]], branches: list[dict[str, Any]]) -> str:
    lines = ["| environment | fork method | depth | snapshot (ms) | pickled (KB) | pickle round trip (ms) | "
             "restore (ms) | replay (ms) | replay / restore | replay, search cache empty (ms) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in members:
        cold = "–" if r["replay_cold_search_ms"] is None else f"{r['replay_cold_search_ms']:.3f}"
        lines.append(f"| {r['env']} | {r['method']} | {r['depth']} | {r['snapshot_ms']:.3f} | {r['pickled_kb']:.1f} | "
                     f"{r['pickle_round_trip_ms']:.3f} | {r['restore_ms']:.3f} | {r['replay_ms']:.3f} | "
                     f"{r['replay_over_restore']:.1f}× | {cold} |")
    if branches:
        lines += ["", "| environment | backend | depth | children | branch (ms) | × in-process |",
                  "|---|---|---:|---:|---:|---:|"]
        for r in branches:
            lines.append(f"| {r['env']} | {r['backend']} | {r['depth']} | {r['children']} | {r['branch_ms']:.2f} | "
                         f"{r['over_in_process']:.1f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    given = list(sys.argv[1:] if argv is None else argv)  # engines imported later may rewrite sys.argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=[e for e in ENVS if e != "appworld"])
    ap.add_argument("--depths", nargs="+", type=int, default=[0, 5, 10, 20])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--branch-depth", type=int, default=10)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-branch", action="store_true", help="member timings only")
    ap.add_argument("--no-ray", action="store_true", help="leave out the Ray backend")
    ap.add_argument("--ray-cpus", type=float, default=2.0, help="CPUs of the local Ray instance")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(given)
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine, commit = machine_summary(load=True), _git_commit()
    members: list[dict[str, Any]] = []
    for name in tqdm(args.envs, desc="members"):
        members += member_rows(name, sorted(args.depths), args.repeats, args.seed)
    branches: list[dict[str, Any]] = []
    if not args.no_branch:
        ray = None
        if not args.no_ray:
            import ray

            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(address="local", num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
        try:
            for name in tqdm(args.envs, desc="branch"):
                branches += branch_rows(name, args.branch_depth, args.group_size, max(3, args.repeats // 2),
                                        args.seed, None if args.no_ray else args.ray_cpus)
        finally:
            if ray is not None:
                ray.shutdown()
    table = _tables(members, branches)
    print(table)
    command = "python benchmarks/fork_speed.py " + " ".join(given)
    header = (f"`{command.strip()}` — {date}, commit {commit}; {machine}.\n\n"
              f"Median of {args.repeats} runs per member timing (branch: {max(3, args.repeats // 2)}). The parent "
              "played random non-terminal actions (admissible ones where the environment lists them) from a "
              "seeded reset; the restoring member had restored the same snapshot once before (its game or room "
              "loaded). *restore* is the environment's own fork method (for ALFWorld the replay itself); *replay* "
              "resets with the snapshot's recorded arguments and `np_random` state and steps its actions again, "
              "finding its searches in the process's search cache (WebShop, SearchQA; the last column empties the "
              "cache first, as a replay in another process finds it); "
              + ("AppWorld's parent played code steps instead (`appworld_action`: the log-in, then Venmo pages "
                 "read into REPL variables); its *restore* opens a world server and a sandboxed REPL and first "
                 "snapshots the restoring member's own live episode, to roll back to on failure. "
                 if "appworld" in args.envs else "") +
              f"*branch* forks member 0 of a group of {args.group_size} into the other {args.group_size - 1} "
              "(with workers: members 0-1 and 2-3 on two workers, so two children are restored on the other "
              "worker, the snapshot crossing a pipe or the Ray object store).\n\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fork_speed.md").write_text(f"# Fork cost\n\n{header}{table}\n")
    result = {"date": date, "machine": machine, "commit": commit, "settings": vars(args) | {"out": str(args.out)},
              "members": members, "branch": branches}
    (args.out / "fork_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {args.out}")
    return result


if __name__ == "__main__":
    main()
