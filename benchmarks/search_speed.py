"""SearchQA speed: retrieval queries per second and environment steps per second.

For each retriever (BM25, dense, hybrid) over the shipped corpus it measures

* batched retrieval: one ``search`` call with ``--batch`` distinct queries (entity names and question
  texts), query cache off;
* single retrieval: ``--single`` calls of one query each, query cache off;
* environment steps: ``--groups`` × ``--members`` :class:`SearchQAEnv` members sharing one retriever,
  stepped in a plain loop by oracle agents (searches and answers, as a trained agent would) for
  ``--rounds`` resets, once with the query cache off and once on (the default: the members of a group
  that issue the same query share one search).

Prints a Markdown table and writes it to ``benchmarks/results/search_speed/search_speed.md``.

Usage: ``python -m benchmarks.search_speed [--retrievers bm25 dense hybrid] [--cache-dir DIR]``.
The first dense run embeds the corpus (about a minute on two cores); later runs load the cached index.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pathlib import Path

from agentgym_credit.envs.searchqa.corpus import default_questions_path, load_corpus, load_questions
from agentgym_credit.envs.searchqa.env import SearchQAEnv
from agentgym_credit.envs.searchqa.oracle import OracleAgent
from agentgym_credit.envs.searchqa.retrieval import RETRIEVER_KINDS, Retriever, get_retriever

RESULTS = Path(__file__).resolve().parent / "results" / "search_speed" / "search_speed.md"


def _queries(n: int) -> list[str]:
    corpus = load_corpus()
    questions = load_questions(default_questions_path("test"))
    pool = list(dict.fromkeys([p.title for p in corpus] + [q.question for q in questions]))
    random.Random(0).shuffle(pool)
    return pool[:n]


def _set_query_cache(retriever: Retriever, size: int) -> None:
    """Resize the query caches of a retriever and of the parts of a hybrid (0 switches them off)."""
    for part in [retriever, *getattr(retriever, "retrievers", [])]:
        part.query_cache_size = size
        part.clear_query_cache()


def _batched_qps(retriever: Retriever, queries: list[str], topk: int) -> float:
    retriever.search(queries[:8], topk)  # warm-up
    start = time.perf_counter()
    retriever.search(queries, topk)
    return len(queries) / (time.perf_counter() - start)


def _single_qps(retriever: Retriever, queries: list[str], topk: int) -> float:
    retriever.search(queries[:1], topk)
    start = time.perf_counter()
    for query in queries:
        retriever.search([query], topk)
    return len(queries) / (time.perf_counter() - start)


def _env_steps_per_second(
    retriever: Retriever, groups: int, members: int, rounds: int, topk: int
) -> tuple[float, float]:
    envs = [SearchQAEnv(split="test", retriever=retriever, topk=topk) for _ in range(groups * members)]
    steps, wins, episodes = 0, 0, 0
    start = time.perf_counter()
    for r in range(rounds):
        observations, agents, live = [], [], []
        for i, env in enumerate(envs):
            obs, _ = env.reset(seed=r * groups + i // members, options={"group_id": i // members})
            observations.append(obs)
            agents.append(OracleAgent(env.question))
            live.append(True)
        while any(live):
            for i, env in enumerate(envs):
                if not live[i]:
                    continue
                obs, _, terminated, truncated, info = env.step(agents[i].act(observations[i]))
                observations[i] = obs
                steps += 1
                if terminated or truncated:
                    live[i] = False
                    wins += bool(info["won"])
                    episodes += 1
    return steps / (time.perf_counter() - start), wins / episodes


def _set_threads(threads: int) -> None:
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:  # pragma: no cover - dense retrieval needs torch anyway
        pass
    try:
        import faiss

        faiss.omp_set_num_threads(threads)
    except ImportError:  # pragma: no cover
        pass


def main(argv: list[str] | None = None) -> str:
    """Run the benchmark; returns the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--retrievers", nargs="+", choices=RETRIEVER_KINDS, default=list(RETRIEVER_KINDS))
    parser.add_argument(
        "--cache-dir", default=None, help="index cache (default ~/.cache/agentgym_credit/searchqa)"
    )
    parser.add_argument("--batch", type=int, default=256, help="queries in the batched call")
    parser.add_argument("--single", type=int, default=64, help="one-query calls timed")
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch and FAISS threads (on a shared 2-core machine 1 thread is several times faster than 2)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    _set_threads(args.threads)

    corpus = load_corpus()
    options = {"cache_dir": args.cache_dir} if args.cache_dir else {}
    queries = _queries(args.batch)
    rows = []
    for kind in args.retrievers:
        t0 = time.perf_counter()
        retriever = get_retriever(kind, corpus, **options)
        ready = time.perf_counter() - t0
        cache_size = retriever.query_cache_size
        _set_query_cache(retriever, 0)
        batched = _batched_qps(retriever, queries, args.topk)
        single = _single_qps(retriever, queries[: args.single], args.topk)
        raw_steps, _ = _env_steps_per_second(retriever, args.groups, args.members, args.rounds, args.topk)
        _set_query_cache(retriever, cache_size)
        steps, win_rate = _env_steps_per_second(retriever, args.groups, args.members, args.rounds, args.topk)
        rows.append((kind, ready, batched, single, raw_steps, steps, win_rate))
        print(
            f"{kind}: ready {ready:.1f}s, batched {batched:,.0f} q/s, single {single:,.0f} q/s, "
            f"env {raw_steps:,.0f} steps/s uncached, {steps:,.0f} cached (oracle win rate {win_rate:.2f})",
            flush=True,
        )

    n = args.groups * args.members
    lines = [
        f"# SearchQA speed ({len(corpus):,} passages, top-{args.topk})",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
        f"Python {platform.python_version()}, {args.threads} torch/FAISS thread(s). Batched: one call with {args.batch} queries; single: "
        f"{args.single} one-query calls; env: {args.groups} groups × {args.members} members = {n} "
        f"`SearchQAEnv` sharing one retriever, stepped in a plain loop by oracle agents for {args.rounds} resets. "
        "Index ready: seconds to build the index, or to load it where it was cached already (hybrid reuses "
        "the BM25 and dense retrievers). "
        f"1-minute load average when the table was written: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
        "(above the core count, other jobs shared the machine and the rates are lower than on an idle one).",
        "",
        f"| retriever | index ready (s) | batched queries/s | single queries/s | env steps/s, {n} members, "
        "no query cache | env steps/s, query cache | oracle win rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {kind} | {ready:.1f} | {batched:,.0f} | {single:,.0f} | {raw:,.0f} | {steps:,.0f} | {win:.2f} |"
            for kind, ready, batched, single, raw, steps, win in rows
        ],
        "",
    ]
    table = "\n".join(lines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(table)
    return table


if __name__ == "__main__":
    main()
