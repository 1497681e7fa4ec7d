"""Speed of the Sokoban engine: member-env steps per second and room generation / solving time.

Measures, on one CPU core:

* steps/s of :class:`~agentgym_credit.envs.sokoban.SokobanEnv` with uniformly random actions (default
  15-step episodes, each from a freshly generated room), with and without the resets, and ms per reset;
* ms per room of :func:`~agentgym_credit.envs.sokoban.generate_room` and of a new room's
  :class:`~agentgym_credit.envs.sokoban.SokobanSolver` (first distance query + optimal plan), with the
  mean optimal solution length, for 6×6/1, 6×6/2 and 7×7/2 rooms.

Usage::

    python benchmarks/sokoban_speed.py [--rooms 500] [--steps 50000] [--seed 0]

Prints a Markdown table and writes it to ``benchmarks/results/sokoban_speed/sokoban_speed.md``.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from agentgym_credit.envs.sokoban import ACTIONS, SokobanEnv, SokobanSolver, generate_room

CONFIGS: tuple[tuple[tuple[int, int], int], ...] = (((6, 6), 1), ((6, 6), 2), ((7, 7), 2))
RESULTS = Path(__file__).resolve().parent / "results" / "sokoban_speed" / "sokoban_speed.md"


def env_steps_per_second(dim: tuple[int, int], boxes: int, steps: int, seed: int) -> dict[str, float]:
    """Random-action throughput of one member env.

    Returns:
        ``sps`` steps/s with resets included (a rollout's view), ``step_sps`` steps/s of ``step()``
        alone, ``reset_ms`` ms per ``reset()`` (new room + solver + walkthrough) and ``episode_len``.
    """
    env = SokobanEnv(dim_room=dim, num_boxes=boxes)
    rng = np.random.default_rng(seed)
    actions = [ACTIONS[i] for i in rng.integers(len(ACTIONS), size=steps)]
    env.reset(seed=seed)
    episodes = 1
    step_time = reset_time = 0.0
    clock = time.perf_counter
    for action in actions:
        t0 = clock()
        _, _, terminated, truncated, _ = env.step(action)
        t1 = clock()
        step_time += t1 - t0
        if terminated or truncated:
            env.reset()
            reset_time += clock() - t1
            episodes += 1
    return {
        "sps": steps / (step_time + reset_time),
        "step_sps": steps / step_time,
        "reset_ms": reset_time * 1e3 / max(episodes - 1, 1),
        "episode_len": steps / episodes,
    }


def room_timings(dim: tuple[int, int], boxes: int, rooms: int, seed: int) -> dict[str, float]:
    """ms per room for generation and for a new room's solver, plus solution-length statistics."""
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    states = [generate_room(rng, dim, boxes) for _ in range(rooms)]
    gen_ms = (time.perf_counter() - start) * 1e3 / rooms
    distances = []
    start = time.perf_counter()
    for state in states:
        solver = SokobanSolver(state.room)
        distances.append(solver.distance(state))
        solver.plan(state)
    solve_ms = (time.perf_counter() - start) * 1e3 / rooms
    d = np.array(distances, dtype=float)
    assert np.all(np.isfinite(d)) and np.all(d > 0), "every generated room must be solvable and unsolved"
    return {
        "gen_ms": gen_ms,
        "solve_ms": solve_ms,
        "mean_d": float(d.mean()),
        "max_d": float(d.max()),
        "within_15": float(np.mean(d <= 15)),
    }


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--rooms", type=int, default=500, help="rooms per configuration")
    parser.add_argument("--steps", type=int, default=50_000, help="env steps per configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS, help="Markdown file to write")
    args = parser.parse_args(argv)

    rows = []
    for dim, boxes in tqdm(CONFIGS, desc="sokoban configs"):
        timings = room_timings(dim, boxes, args.rooms, args.seed)
        rows.append((dim, boxes, env_steps_per_second(dim, boxes, args.steps, args.seed), timings))

    lines = [
        "# Sokoban engine speed",
        "",
        f"{args.rooms} rooms and {args.steps} random-action env steps per configuration; seed {args.seed}; "
        f"Python {platform.python_version()}, {platform.machine()}, one process on a shared machine (timings "
        "are under contention). Rooms come from the default generator (verl-agent's exhaustive reverse play "
        "with random player movement); difficulty against the papers' generator: `sokoban_difficulty.py`.",
        "",
        "| room | boxes | env steps/s (resets incl.) | step() only, steps/s | reset ms | mean episode "
        "length | generation ms/room | solver ms/new room | mean optimal moves | max | solvable in ≤ 15 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dim, boxes, e, t in rows:
        lines.append(
            f"| {dim[0]}×{dim[1]} | {boxes} | {e['sps']:,.0f} | {e['step_sps']:,.0f} | {e['reset_ms']:.2f} | "
            f"{e['episode_len']:.1f} | {t['gen_ms']:.2f} | {t['solve_ms']:.2f} | {t['mean_d']:.2f} | "
            f"{t['max_d']:.0f} | {t['within_15']:.1%} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(f"written to {args.out}")
    return table


if __name__ == "__main__":
    main()
