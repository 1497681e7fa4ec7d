"""Soak: memory and time of long runs — ``AttachCredit`` over 1,000 rollouts, and a retrieval-server burst.

AttachCredit part: the README's loop (``reset``; step every member with an LLM-format response until all
finished; take the batch and advantages) repeated ``--iters`` times on ``Sokoban-Group-v0`` (4 groups × 4
members by default so that 1,000 iterations take minutes; the README's 16 × 8 with ``--groups 16
--group-size 8``) through
``ParseActions`` and ``PromptObservations``, with the README's estimator (``graphgpo``,
``omega="sokoban"``). Responses are random moves (20 % malformed), seeded. At iterations 100 and
``--iters`` (and every ``--every``) it prints the process's resident memory (RSS), the mean seconds per
iteration over the last ``--every`` iterations and the number of trajectories the wrapper still holds.
``--take credit_batch`` uses ``credit_batch()`` as the README does (the next ``reset`` releases the
rollout); ``--take pop_credit`` releases it at once. A flat run has RSS and time at the last checkpoint
close to those at iteration 100 (the ratios are printed).

Server part (``--server-burst N``, 0 to skip): the Search-R1 ``/retrieve`` server as shipped
(``RetrievalServer`` over the bm25 retriever) receives N requests at the same moment, one connection
each (``benchmarks/server_load.py``'s ``burst``, which also compares listen backlogs); it prints how
many were answered, the failures by kind, wall time, latency percentiles and RSS before and after.

Usage: ``python benchmarks/soak.py [--iters 1000 --groups 4 --group-size 4 --server-burst 500]``.
Writes ``benchmarks/results/soak/soak.md`` and ``soak.json``. Timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
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
from agentgym_credit.wrappers import AttachCredit, ParseActions, PromptObservations  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "soak"
MOVES = ("up", "down", "left", "right")


def rss_mb() -> float:
    """Resident set size of this process in MB (Linux ``/proc``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _responses(rng: np.random.Generator, n: int) -> list[str]:
    moves = rng.choice(MOVES, size=n)
    bad = rng.random(n) < 0.2
    return [f"I think {m}" if b else f"<think>go</think><action>{m}</action>" for m, b in zip(moves, bad, strict=True)]


def credit_soak(iters: int, groups: int, size: int, every: int, take: str, seed: int) -> list[dict[str, Any]]:
    """Run the AttachCredit loop; one row per checkpoint (iteration 100, every ``every``, the last)."""
    vec = gym.make_vec("Sokoban-Group-v0", num_envs=groups * size, group_size=size,
                       vectorization_mode="vector_entry_point")
    env = AttachCredit(ParseActions(PromptObservations(vec, "sokoban")), "graphgpo", omega="sokoban")
    rng = np.random.default_rng(seed)
    checkpoints = sorted({c for c in (100, iters) if c <= iters} | set(range(every, iters + 1, every)))
    rows: list[dict[str, Any]] = []
    window: list[float] = []
    start_rss = rss_mb()
    for it in tqdm(range(1, iters + 1), desc=f"AttachCredit soak ({take})", mininterval=5):
        t0 = time.perf_counter()
        env.reset(seed=seed + it)
        while not env.unwrapped.finished.all():
            env.step(_responses(rng, env.num_envs))
        batch, adv = env.pop_credit() if take == "pop_credit" else env.credit_batch()
        assert len(batch) == len(adv) and batch.num_trajectories == groups * size
        window.append(time.perf_counter() - t0)
        if it in checkpoints:
            held = len(env.recorder.batch().traj_starts)
            rows.append({"part": "attach_credit", "take": take, "iteration": it, "rss_mb": round(rss_mb(), 1),
                         "s_per_iter": round(float(np.mean(window[-every:])), 4), "held_trajectories": held,
                         "start_rss_mb": round(start_rss, 1)})
            tqdm.write(f"iteration {it:>5}: RSS {rows[-1]['rss_mb']:7.1f} MB, "
                       f"{rows[-1]['s_per_iter']:.3f} s/iteration (mean of the last {min(every, it)}), "
                       f"{held} trajectories held")
    env.close()
    return rows


def server_burst(n: int, timeout: float = 60.0) -> dict[str, Any]:
    """``n`` simultaneous ``/retrieve`` requests to the server as shipped (``benchmarks/server_load.burst``)."""
    from agentgym_credit.envs.searchqa.corpus import load_corpus
    from agentgym_credit.envs.searchqa.retrieval import get_retriever
    from agentgym_credit.envs.searchqa.server import RetrievalServer
    from benchmarks.server_load import burst

    retriever = get_retriever("bm25")
    queries = [p.title for p in load_corpus()]
    rss_before = rss_mb()
    with RetrievalServer(retriever) as server:
        result = burst(server.url, queries, requests=n, timeout=timeout)
    return {"part": "server_burst", "requests": n, "ok": result.succeeded, "failed": n - result.succeeded,
            "failures": dict(result.failures), "wall_s": round(result.wall_s, 2),
            "p50_ms": round(result.percentile(50), 1), "p99_ms": round(result.percentile(99), 1),
            "rss_before_mb": round(rss_before, 1), "rss_after_mb": round(rss_mb(), 1)}


def _markdown(rows: list[dict[str, Any]], burst: dict[str, Any] | None, args: argparse.Namespace) -> str:
    lines = [
        "# Soak",
        "",
        f"`python benchmarks/soak.py --iters {args.iters} --groups {args.groups} --group-size {args.group_size} "
        f"--take {args.take} --server-burst {args.server_burst}` (timings taken on a shared 2-core machine "
        "under load from other jobs; compare ratios, not absolute times).",
        "",
        f"## AttachCredit: {args.groups} groups × {args.group_size} members of Sokoban-Group-v0, graphgpo, "
        f"`{args.take}()` after each rollout",
        "",
        "| iteration | RSS (MB) | s / iteration (mean of the last window) | trajectories held |",
        "|---:|---:|---:|---:|",
    ]
    lines += [f"| {r['iteration']} | {r['rss_mb']} | {r['s_per_iter']} | {r['held_trajectories']} |" for r in rows]
    first = next((r for r in rows if r["iteration"] == 100), rows[0])
    last = rows[-1]
    lines += ["", f"Iteration {last['iteration']} vs {first['iteration']}: RSS × {last['rss_mb'] / first['rss_mb']:.3f}, "
                  f"time per iteration × {last['s_per_iter'] / first['s_per_iter']:.3f}."]
    if burst is not None:
        lines += ["", f"## Retrieval server: {burst['requests']} simultaneous `/retrieve` requests", "",
                  f"{burst['ok']} answered, {burst['failed']} failed ({burst['failures'] or 'none'}), "
                  f"{burst['wall_s']} s wall, latency p50 {burst['p50_ms']} ms / p99 {burst['p99_ms']} ms; "
                  f"RSS {burst['rss_before_mb']} → {burst['rss_after_mb']} MB."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--every", type=int, default=100, help="checkpoint period (iterations)")
    parser.add_argument("--take", choices=["credit_batch", "pop_credit"], default="credit_batch")
    parser.add_argument("--server-burst", type=int, default=500, help="simultaneous requests (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = credit_soak(args.iters, args.groups, args.group_size, args.every, args.take, args.seed)
    burst = None
    if args.server_burst > 0:
        burst = server_burst(args.server_burst)
        print(f"server burst: {burst['ok']}/{burst['requests']} answered, failures {burst['failures']}, "
              f"{burst['wall_s']} s, RSS {burst['rss_before_mb']} -> {burst['rss_after_mb']} MB")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.md").write_text(_markdown(rows, burst, args))
    (args.out / "soak.json").write_text(json.dumps({"attach_credit": rows, "server_burst": burst}, indent=2) + "\n")
    return {"attach_credit": rows, "server_burst": burst}


if __name__ == "__main__":
    main()
