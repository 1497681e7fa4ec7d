"""Training curves on Sokoban-Group-v0 with each credit estimator.

The same small policy is trained with grpo, rloo, gigpo, salt and graphgpo for several seeds; only the
advantages differ. Two trainers:

* ``--trainer sb3`` (default, the fastest learner on CPU): ``sb3_contrib.MaskablePPO`` with an MLP on
  sentence embeddings of the board, through :mod:`agentgym_credit.baselines.sb3_adapter` — the buffer's
  advantages are replaced by the estimator's after every rollout. Groups are drawn from a fixed pool of
  ``--room-pool`` rooms (16 by default: learning to solve unseen rooms takes far more than a CPU budget;
  ``--room-pool 0`` draws a fresh room every episode). The final score is the success rate of the
  trained policy (sampling its own action distribution) over ``--eval-episodes`` episodes on the pool's
  rooms (held-out rooms without a pool), the same for every run, next to a uniformly random policy.
* ``--trainer llm``: the LLM policy-gradient trainer (:mod:`agentgym_credit.baselines.trainer`, default
  model ``tiny``); the final score is the mean training success rate over the last 20% of iterations.

Each run stops at ``--iters`` PPO iterations (rollouts) or ``--minutes-per-run`` minutes, whichever comes
first; the budget actually used is written into the table header. The iteration budget keeps runs
comparable (the same number of environment steps for every estimator); the minutes are a cap. Runs go to
``--jobs`` worker processes (default: the free cores, one torch thread each).

Usage::

    python benchmarks/train_compare.py                               # full budget: ≈10 minutes per run
    python benchmarks/train_compare.py --iters 300 --minutes-per-run 3 --jobs 2   # ≈7 minutes in all

Writes ``benchmarks/results/train_compare/train_compare.{md,csv,png}`` and the per-run curves to
``train_compare_curves.csv``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS = Path(__file__).resolve().parent / "results" / "train_compare"
ESTIMATORS: dict[str, dict[str, Any]] = {
    "grpo": {},
    "rloo": {},
    "gigpo": {"omega": 1.0, "gamma": 0.95},
    "salt": {"h": 3},
    "graphgpo": {"omega": "sokoban"},
}
EVAL_SEED = 10_000_000


@functools.lru_cache(maxsize=1)
def _embedding_cache() -> Any:
    """One embedding cache per process, shared by its runs (embeddings do not depend on the run)."""
    from agentgym_credit.embedding import EmbeddingCache

    return EmbeddingCache()


def _limit_threads() -> None:
    import torch

    torch.set_num_threads(1)


# ----------------------------------------------------------------------------- SB3 runs
def _success_curve(episodes: list[tuple[int, bool, float, int]], num_envs: int, points: int = 20) -> list[tuple[int, float]]:
    """Success rate of the episodes finished in each of ``points`` equal windows of environment steps."""
    if not episodes:
        return []
    steps = np.array([e[0] for e in episodes]) * num_envs
    wins = np.array([e[1] for e in episodes], dtype=float)
    edges = np.linspace(0, steps.max() + 1, points + 1)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sel = (steps >= lo) & (steps < hi)
        if sel.any():
            out.append((int(hi), float(wins[sel].mean())))
    return out


def evaluate_sb3(model: Any, cache: Any, episodes: int, room_pool: int = 0, seed: int = 0,
                 random_policy: bool = False) -> float:
    """Success rate over ``episodes`` rooms: drawn from the training pool, or held out when there is none.

    Actions are sampled from the policy (uniformly over the admissible ones when ``random_policy``).
    """
    from agentgym_credit.baselines.sb3_adapter import GroupVecEnvAdapter

    env = GroupVecEnvAdapter("Sokoban-Group-v0", groups=episodes, group_size=1, cache=cache, seed=EVAL_SEED,
                             room_pool=room_pool, pool_offset=0 if room_pool else EVAL_SEED)
    obs = env.reset()
    rng = np.random.default_rng(seed)
    wins = np.zeros(episodes, dtype=bool)
    finished = np.zeros(episodes, dtype=bool)
    while not finished.all():
        masks = env.action_masks()
        if random_policy or model is None:
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        else:
            actions, _ = model.predict(obs, action_masks=masks, deterministic=False)
        obs, _, dones, infos = env.step(actions)
        for i in np.flatnonzero(dones & ~finished):
            wins[i] = infos[i]["is_success"]
        finished |= dones
    env.close()
    return float(wins.mean())


def run_sb3(estimator: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train MaskablePPO with ``estimator`` for the budget; return its curve and final success."""
    _limit_threads()
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList

    from agentgym_credit.baselines.sb3_adapter import GroupVecEnvAdapter, make_maskable_ppo

    cache = _embedding_cache()
    env = GroupVecEnvAdapter("Sokoban-Group-v0", groups=args.groups, group_size=args.group_size, cache=cache,
                             seed=seed, room_pool=args.room_pool)
    model, credit = make_maskable_ppo(
        env, estimator, estimator_params=ESTIMATORS[estimator], seed=seed, n_steps=args.n_steps,
        batch_size=args.batch_size, n_epochs=args.n_epochs, learning_rate=args.lr, ent_coef=0.01,
        policy_kwargs={"net_arch": [128, 128]}, verbose=0, device="cpu",
    )
    deadline = time.monotonic() + 60 * args.minutes_per_run

    class Budget(BaseCallback):
        def _on_step(self) -> bool:
            return time.monotonic() < deadline

    start = time.monotonic()
    per_rollout = args.n_steps * env.num_envs
    model.learn(total_timesteps=args.iters * per_rollout, callback=CallbackList([credit, Budget()]))
    train_s = time.monotonic() - start
    final = evaluate_sb3(model, cache, args.eval_episodes, args.room_pool, seed)
    return {
        "estimator": estimator, "seed": seed, "final_success": final, "train_s": train_s,
        "env_steps": int(model.num_timesteps), "iters": int(model.num_timesteps // per_rollout),
        "train_success_last": float(np.mean([e[1] for e in env.episodes[-max(1, len(env.episodes) // 5):]]))
        if env.episodes else 0.0,
        "curve": _success_curve(env.episodes, env.num_envs),
    }


# ----------------------------------------------------------------------------- LLM runs
def run_llm(estimator: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train the LLM policy with ``estimator`` for the budget; return its curve and final success."""
    _limit_threads()
    from agentgym_credit.baselines.config import TrainConfig
    from agentgym_credit.baselines.trainer import Trainer

    config = TrainConfig(
        estimator=estimator, estimator_params=ESTIMATORS[estimator], model=args.model, groups=args.groups,
        group_size=args.group_size, iters=args.iters, seed=seed, lr=args.llm_lr, max_new_tokens=args.max_new_tokens,
        out_dir=str(args.out / "train_compare_runs" / f"{estimator}-{seed}"), num_threads=1, progress_bar=False,
    )
    trainer = Trainer(config)
    deadline = time.monotonic() + 60 * args.minutes_per_run
    start, curve, steps = time.monotonic(), [], 0
    for it in range(config.iters):
        metrics = trainer.iterate(it)
        steps += int(len(trainer.last_batch)) if trainer.last_batch is not None else 0
        curve.append((steps, float(metrics["success_rate"])))
        if time.monotonic() > deadline:
            break
    tail = [s for _, s in curve[-max(1, len(curve) // 5):]]
    return {
        "estimator": estimator, "seed": seed, "final_success": float(np.mean(tail)) if tail else 0.0,
        "train_s": time.monotonic() - start, "env_steps": steps, "iters": len(curve),
        "train_success_last": float(np.mean(tail)) if tail else 0.0, "curve": curve,
    }


def _run(job: tuple[str, str, int, argparse.Namespace]) -> dict[str, Any]:
    trainer, estimator, seed, args = job
    return (run_sb3 if trainer == "sb3" else run_llm)(estimator, seed, args)


# ----------------------------------------------------------------------------- report
def _mean_curve(curves: list[list[tuple[int, float]]], points: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    top = min(c[-1][0] for c in curves if c)
    grid = np.linspace(0, top, points + 1)[1:]
    ys = np.array([np.interp(grid, [x for x, _ in c], [y for _, y in c]) for c in curves if c])
    return grid, ys.mean(0), ys.std(0)


def plot(rows: list[dict[str, Any]], names: list[str], path: Path, title: str, baseline: float | None) -> None:
    """Training success against environment steps: each estimator's mean over seeds, ± std as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    seeds = len({r["seed"] for r in rows})
    for name in names:
        curves = [r["curve"] for r in rows if r["estimator"] == name and r["curve"]]
        if not curves:
            continue
        x, mean, std = _mean_curve(curves)
        ax.plot(x, mean, label=name)
        ax.fill_between(x, np.clip(mean - std, 0, 1), np.clip(mean + std, 0, 1), alpha=0.2)
    if baseline is not None:
        ax.axhline(baseline, color="grey", ls="--", lw=1, label="random policy")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("training success rate")
    ax.set_ylim(0, 1.02)  # a rate: the whole range, so that no band is cut off at the top
    ax.set_title(f"{title}, " + (f"mean ± std over {seeds} seeds" if seeds > 1 else "1 seed (no spread)"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # beside the axes: it covers no curve
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(rows: list[dict[str, Any]], args: argparse.Namespace, out: Path, baseline: float | None) -> str:
    """Write the Markdown/CSV tables, the curves CSV and the PNG plot; return the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    names = [e for e in args.estimators if any(r["estimator"] == e for r in rows)]
    steps = [r["env_steps"] for r in rows]
    secs = [r["train_s"] for r in rows]
    header = (
        f"Training comparison on Sokoban-Group-v0 (6×6, 1 box, 15 steps), trainer `{args.trainer}`, "
        f"{args.groups} groups × {args.group_size}, seeds {args.seeds}. Budget per run: "
        f"≤ {args.iters} PPO iterations or ≤ {args.minutes_per_run:g} min, whichever came first — used "
        f"{min(steps):,}–{max(steps):,} env steps and {min(secs):.0f}–{max(secs):.0f} s of training per run "
        f"({args.jobs} parallel job(s), 1 thread each, shared 2-core machine)."
    )
    if args.trainer == "sb3":
        rooms = (f"episodes on the fixed pool of {args.room_pool} training rooms" if args.room_pool
                 else "held-out rooms")
        header += (f" Final success: the trained policy, sampling its actions, on {args.eval_episodes} {rooms} "
                   "(the same for all runs)"
                   + (f"; a uniformly random policy scores {baseline:.3f} there." if baseline is not None else "."))
    else:
        header += " Final success: mean training success rate over the last 20% of iterations."
    table = ["| estimator | final success (mean ± std) | train success, last 20% of training | env steps | runs |",
             "|---|---:|---:|---:|---:|"]
    csv_rows = []
    for name in sorted(names, key=lambda n: -np.mean([r["final_success"] for r in rows if r["estimator"] == n])):
        mine = [r for r in rows if r["estimator"] == name]
        final = np.array([r["final_success"] for r in mine])
        last = np.array([r["train_success_last"] for r in mine])
        std = final.std(ddof=1) if len(final) > 1 else 0.0
        table.append(f"| {name} | {final.mean():.3f} ± {std:.3f} | {last.mean():.3f} | "
                     f"{int(np.mean([r['env_steps'] for r in mine]))} | {len(mine)} |")
        csv_rows.append({"estimator": name, "final_success_mean": final.mean(), "final_success_std": std,
                         "train_success_last_mean": last.mean(), "runs": len(mine),
                         "per_seed": " ".join(f"{v:.3f}" for v in final)})
    command = " ".join(["python benchmarks/train_compare.py", *args.argv])
    md = header + f"\n\nCommand: `{command}`\n\n" + "\n".join(table) + "\n"
    (out / "train_compare.md").write_text(md)
    with open(out / "train_compare.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(csv_rows[0]))
        writer.writeheader()
        writer.writerows(csv_rows)
    with open(out / "train_compare_curves.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["estimator", "seed", "env_steps", "success_rate"])
        for r in rows:
            writer.writerows([r["estimator"], r["seed"], x, y] for x, y in r["curve"])
    plot(rows, names, out / "train_compare.png", f"Sokoban-Group-v0, {args.trainer}", baseline)
    return md


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    from agentgym_credit.baselines.runtime import free_cores

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--trainer", choices=("sb3", "llm"), default="sb3")
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--minutes-per-run", type=float, default=10.0, help="time cap of each run")
    parser.add_argument("--iters", type=int, default=3000, help="PPO iterations (rollouts) per run")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--n-steps", type=int, default=32, help="sb3: steps per member per rollout")
    parser.add_argument("--batch-size", type=int, default=128, help="sb3: minibatch size")
    parser.add_argument("--n-epochs", type=int, default=4, help="sb3: PPO epochs per rollout")
    parser.add_argument("--lr", type=float, default=3e-4, help="sb3: learning rate")
    parser.add_argument("--eval-episodes", type=int, default=100, help="sb3: episodes of the final score")
    parser.add_argument("--room-pool", type=int, default=16,
                        help="sb3: train (and score) on this fixed set of rooms; 0 = a fresh room every episode, "
                             "scored on held-out rooms")
    parser.add_argument("--model", default="tiny", help="llm: policy model")
    parser.add_argument("--llm-lr", type=float, default=1e-4, help="llm: learning rate")
    parser.add_argument("--max-new-tokens", type=int, default=24, help="llm: response budget")
    parser.add_argument("--jobs", type=int, default=0, help="parallel runs (0 = the free cores)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.jobs = args.jobs or free_cores()
    jobs = [(args.trainer, e, s, args) for s in args.seeds for e in args.estimators]
    from tqdm import tqdm

    rows: list[dict[str, Any]] = []
    if args.jobs > 1:
        with mp.get_context("spawn").Pool(args.jobs, initializer=_limit_threads) as pool:
            for row in tqdm(pool.imap_unordered(_run, jobs), total=len(jobs), desc="runs"):
                rows.append(row)
    else:
        for job in tqdm(jobs, desc="runs"):
            rows.append(_run(job))
    baseline = None
    if args.trainer == "sb3":
        baseline = evaluate_sb3(None, _embedding_cache(), args.eval_episodes, args.room_pool, random_policy=True)
    md = write_report(rows, args, args.out, baseline)
    print(md)
    return rows


if __name__ == "__main__":
    main()
