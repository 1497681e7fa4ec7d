"""Speed of WebShop-Group-v0: env steps/s, search latency, reward latency, index build time.

Measures, on the shipped catalog:

* catalog load time (cold, from the gzipped JSON files);
* search index build time (BM25 over every product) and load time from the on-disk cache;
* search latency per query (uncached: the per-query cache is cleared before each query);
* reward latency per purchase (:func:`score_purchase` on random products, goals and options);
* env steps/s for the scripted shopper and for a random policy over the admissible actions
  (``search[...]`` filled with a few words of the instruction), resets included.

Prints a Markdown table and writes it to ``benchmarks/results/webshop_speed/webshop_speed.md``.

Usage::

    python benchmarks/webshop_speed.py [--episodes 300] [--random-steps 5000] [--queries 500] [--note TEXT]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentgym_credit.envs.webshop import catalog as catalog_module
from agentgym_credit.envs.webshop import search as search_module
from agentgym_credit.envs.webshop.catalog import load_catalog
from agentgym_credit.envs.webshop.env import WebShopEnv
from agentgym_credit.envs.webshop.reward import score_purchase
from agentgym_credit.envs.webshop.search import SearchIndex, get_search_index
from agentgym_credit.envs.webshop.shopper import run_shopper

RESULTS = Path(__file__).resolve().parent / "results" / "webshop_speed" / "webshop_speed.md"


def _timed(fn: Callable[[], object], repeat: int = 5) -> float:
    """Best wall time of ``repeat`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _percentiles(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return statistics.fmean(ordered), statistics.median(ordered), p95


def bench_catalog_and_index() -> list[tuple[str, str]]:
    rows = []
    load_cold = _timed(lambda: (catalog_module._load_cached.cache_clear(), load_catalog()), repeat=3)
    cat = load_catalog()
    rows.append(("catalog load (1 × gz JSON → dataclasses)", f"{load_cold * 1e3:.1f} ms"))
    rows.append(("catalog size", f"{len(cat)} products, {len(cat.goals)} goals"))
    build = _timed(lambda: SearchIndex.build(cat), repeat=3)
    rows.append(("index build (BM25, all products)", f"{build * 1e3:.1f} ms"))
    with tempfile.TemporaryDirectory() as tmp:
        get_search_index(cat, cache_dir=tmp)

        def reload() -> None:
            search_module._INDEXES.clear()
            get_search_index(cat, cache_dir=tmp)

        rows.append(("index load from disk cache", f"{_timed(reload) * 1e3:.2f} ms"))
    search_module._INDEXES.clear()
    return rows


def bench_search(n_queries: int) -> list[tuple[str, str]]:
    cat = load_catalog()
    index = get_search_index(cat)
    rng = random.Random(0)
    goals = [cat.goals[rng.randrange(len(cat.goals))] for _ in range(n_queries)]
    rows = []
    for label, texts in (
        ("search latency, product-type query", [g.query for g in goals]),
        ("search latency, full instruction", [g.instruction_text for g in goals]),
    ):
        samples = []
        for text in texts:
            index._cache.clear()
            start = time.perf_counter()
            index.search(text)
            samples.append(time.perf_counter() - start)
        mean, median, p95 = _percentiles(samples)
        rows.append((label, f"mean {mean * 1e3:.3f} ms, p50 {median * 1e3:.3f} ms, p95 {p95 * 1e3:.3f} ms"))
    return rows


def bench_reward(n: int) -> list[tuple[str, str]]:
    cat = load_catalog()
    rng = random.Random(1)
    cases = []
    for _ in range(n):
        goal = cat.goals[rng.randrange(len(cat.goals))]
        product = cat.product(goal.asin) if rng.random() < 0.5 else cat.products[rng.randrange(len(cat))]
        options = {name: rng.choice(values) for name, values in product.options.items()}
        cases.append((product, goal, options))
    samples = []
    for product, goal, options in cases:
        start = time.perf_counter()
        score_purchase(product, goal, options)
        samples.append(time.perf_counter() - start)
    mean, median, p95 = _percentiles(samples)
    return [
        (
            "reward latency (score_purchase)",
            f"mean {mean * 1e6:.1f} µs, p50 {median * 1e6:.1f} µs, p95 {p95 * 1e6:.1f} µs",
        )
    ]


def bench_env(episodes: int, random_steps: int) -> list[tuple[str, str]]:
    rows = []
    start = time.perf_counter()
    env = WebShopEnv(split="train")
    rows.append(
        ("env construction (warm catalog and index)", f"{(time.perf_counter() - start) * 1e3:.2f} ms")
    )
    for mode in ("text", "text_rich"):
        env = WebShopEnv(split="train", observation_mode=mode)
        steps = wins = 0
        start = time.perf_counter()
        for seed in range(episodes):
            result = run_shopper(env, seed=seed)
            steps += result.steps
            wins += result.won
        elapsed = time.perf_counter() - start
        rows.append(
            (
                f"scripted shopper, {mode} ({episodes} episodes)",
                f"{steps / elapsed:,.0f} steps/s, {episodes / elapsed:,.0f} episodes/s, "
                f"{steps / episodes:.1f} steps/episode, success {wins / episodes:.0%}",
            )
        )
    env = WebShopEnv(split="train")
    rng = random.Random(2)
    _, info = env.reset(seed=0)
    steps = episodes_done = 0
    start = time.perf_counter()
    while steps < random_steps:
        action = rng.choice(info["admissible_actions"])
        if action == "search[...]":
            words = info["task"].split()
            k = rng.randint(1, 4)
            i = rng.randrange(max(1, len(words) - k))
            action = f"search[{' '.join(words[i : i + k])}]"
        _, _, terminated, truncated, info = env.step(action)
        steps += 1
        if terminated or truncated:
            episodes_done += 1
            _, info = env.reset(seed=steps)
    elapsed = time.perf_counter() - start
    rows.append(
        (
            f"random admissible actions ({random_steps} steps)",
            f"{steps / elapsed:,.0f} steps/s ({episodes_done} episodes, resets included)",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--random-steps", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--note", default="", help="a line on the conditions (e.g. a shared, busy machine)")
    args = parser.parse_args()
    rows = bench_catalog_and_index()
    rows += bench_search(args.queries)
    rows += bench_reward(2000)
    rows += bench_env(args.episodes, args.random_steps)
    lines = [
        "# WebShop-Group-v0 speed",
        "",
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        "single process, one thread.",
        *([args.note] if args.note else []),
        "",
        "| measurement | result |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in rows),
        "",
    ]
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
