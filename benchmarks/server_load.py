"""Retrieval-server load: a burst of simultaneous requests against :class:`RetrievalServer`.

``--requests`` client threads (500 by default) wait at a barrier, then each opens its own connection
and posts one Search-R1 ``/retrieve`` request (BM25 over the shipped corpus, top-3) at the same
moment. Counted: requests answered with HTTP 200 and the right number of result lists, failures by
kind (``ConnectionResetError``, timeouts, HTTP errors), the burst's wall time and the latency
percentiles. Run against the server as shipped (listen backlog 1,024, 8 worker threads) and, as the
reference, with socketserver's default backlog of 5, where bursts lose requests to connection resets.

Prints a Markdown table and writes it to ``benchmarks/results/server_load/server_load.md``; :func:`burst` and
:func:`run` are the entry points for other scripts (the soak test calls them).

Usage: ``python -m benchmarks.server_load [--requests 500] [--rounds 5] [--threads 8]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agentgym_credit.envs.searchqa.corpus import load_corpus
from agentgym_credit.envs.searchqa.retrieval import Retriever, get_retriever
from agentgym_credit.envs.searchqa.server import LISTEN_BACKLOG, RetrievalServer

RESULTS = Path(__file__).resolve().parent / "results" / "server_load" / "server_load.md"
SOCKETSERVER_BACKLOG = 5  # socketserver.TCPServer.request_queue_size


@dataclass
class BurstResult:
    """The outcome of one burst.

    Attributes:
        requests: requests sent.
        succeeded: requests answered with HTTP 200 and one result list per query.
        failures: failed requests by kind (exception class name or ``HTTP <status>``).
        wall_s: seconds from the barrier's release to the last answer.
        latencies_ms: per-request latency of the successful requests, in milliseconds.
    """

    requests: int
    succeeded: int
    failures: Counter[str] = field(default_factory=Counter)
    wall_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        """The ``q``-th latency percentile in ms (NaN without successes)."""
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")


def _one_request(url: str, body: bytes, timeout: float) -> tuple[str, float]:
    parts = urllib.parse.urlsplit(url)
    start = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("POST", parts.path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
        if response.status != 200:
            return f"HTTP {response.status}", 0.0
        if len(json.loads(payload)["result"]) != len(json.loads(body)["queries"]):
            return "wrong result", 0.0
        return "ok", (time.perf_counter() - start) * 1000
    except Exception as exc:  # every failure is counted by kind, never raised
        return type(exc).__name__, 0.0
    finally:
        connection.close()


def burst(
    url: str, queries: list[str], *, requests: int = 500, topk: int = 3, timeout: float = 60.0
) -> BurstResult:
    """Send ``requests`` simultaneous ``/retrieve`` requests, one connection each.

    Args:
        url: the server's ``/retrieve`` URL.
        queries: query texts, used in turn (request ``i`` asks ``queries[i % len(queries)]``).
        requests: how many requests start at once.
        topk: the ``topk`` of each request.
        timeout: seconds a request may take.
    """
    barrier = threading.Barrier(requests + 1)
    outcomes: list[tuple[str, float]] = [("not run", 0.0)] * requests

    def client(i: int) -> None:
        body = json.dumps({"queries": [queries[i % len(queries)]], "topk": topk, "return_scores": True})
        barrier.wait()
        outcomes[i] = _one_request(url, body.encode(), timeout)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(requests)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    kinds = Counter(kind for kind, _ in outcomes)
    succeeded = kinds.pop("ok", 0)
    return BurstResult(requests, succeeded, kinds, wall, [ms for kind, ms in outcomes if kind == "ok"])


def run(
    *, requests: int = 500, rounds: int = 5, threads: int = 8, retriever: Retriever | None = None
) -> list[dict[str, object]]:
    """Burst the server as shipped and with socketserver's backlog of 5; one row per (backlog, round)."""
    retriever = retriever if retriever is not None else get_retriever("bm25")
    queries = [p.title for p in load_corpus()]
    rows: list[dict[str, object]] = []
    for backlog in (LISTEN_BACKLOG, SOCKETSERVER_BACKLOG):
        with RetrievalServer(retriever, threads=threads, backlog=backlog) as server:
            for round_ in range(rounds):
                result = burst(server.url, queries[round_ * requests :] or queries, requests=requests)
                rows.append(
                    {
                        "backlog": backlog,
                        "round": round_ + 1,
                        "requests": result.requests,
                        "succeeded": result.succeeded,
                        "failures": ", ".join(f"{k} × {v}" for k, v in sorted(result.failures.items())) or "-",
                        "wall_s": result.wall_s,
                        "requests_per_s": result.succeeded / result.wall_s if result.wall_s else 0.0,
                        "p50_ms": result.percentile(50),
                        "p99_ms": result.percentile(99),
                    }
                )
    return rows


def to_markdown(rows: list[dict[str, object]], threads: int) -> str:
    """The results table with the machine it ran on."""
    lines = [
        "# Retrieval-server load (burst of simultaneous requests)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}; "
        f"server: `RetrievalServer` over BM25 (3,264 passages, top-3), {threads} worker threads, on 127.0.0.1. "
        "Each request opens its own connection; all start together at a barrier. Backlog 1,024 is the "
        "server as shipped; backlog 5 is socketserver's default (the reference). Measured on a shared "
        "machine: times vary with other jobs, and so do the reference's losses (they depend on how many "
        "connections arrive while its accept loop is busy). "
        f"1-minute load average when the table was written: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
        "",
        "| listen backlog | round | requests | succeeded | failures | wall (s) | answered/s | p50 (ms) | p99 (ms) |",
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['backlog']:,} | {r['round']} | {r['requests']} | {r['succeeded']} | {r['failures']} | "
            f"{r['wall_s']:.2f} | {r['requests_per_s']:,.0f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--requests", type=int, default=500, help="simultaneous requests per burst")
    parser.add_argument("--rounds", type=int, default=5, help="bursts per configuration")
    parser.add_argument("--threads", type=int, default=8, help="server worker threads")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    table = to_markdown(run(requests=args.requests, rounds=args.rounds, threads=args.threads), args.threads)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
