"""The plans shipped with the package: every plan the planning oracle uses on the shipped evaluation games.

The oracle (:meth:`~agentgym_credit.envs.alfworld.env.ALFWorldEnv.expert_next_action`) plans from a game's
initial state and follows that plan; it plans again only after a detour or a plan that ends without a win.
:func:`oracle_plans` plays that oracle over games, exactly as ``agc eval --policy oracle`` does (the
planner's command each step, ``"look"`` when it has none, until the game is won or ``max_steps`` are
played), with a :class:`~agentgym_credit.envs.alfworld.plans.PlanCache` that records every plan the episode
asked for (a plan the machine's cache already holds is the planner's own answer for that state: the cache
changes no plan). :func:`build_shipped_plans` does so over the shipped ``valid_seen`` and ``valid_unseen``
games (in worker processes) and writes :data:`~agentgym_credit.envs.alfworld.plans.SHIPPED_PLANS`
(``agc alfworld plans``): xz-compressed JSON, keyed like the cache by the game's and the state's SHA-256,
written with sorted keys so that the same planner writes the same bytes.

The plans are the planner's own: the shipped file is read only with the planner version that made it, and
a test plans the shipped states again and compares.
"""

from __future__ import annotations

import functools
import json
import lzma
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from agentgym_credit.envs.alfworld.data import find_games, shipped_games_root
from agentgym_credit.envs.alfworld.env import ALFWorldEnv
from agentgym_credit.envs.alfworld.plans import SHIPPED_PLANS, PlanCache, planner_version

__all__ = ["EVAL_SPLITS", "build_shipped_plans", "oracle_plans", "write_plans"]

#: The splits whose games' oracle plans are shipped (the evaluation protocol's).
EVAL_SPLITS: tuple[str, ...] = ("valid_seen", "valid_unseen")


class _RecordingPlanCache(PlanCache):
    """A plan cache that also records every plan asked of it (hits included)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(path)
        self.asked: dict[str, dict[str, list[str]]] = {}

    def get(self, game: str, state: str, planner: Any) -> list[str]:
        plan = super().get(game, state, planner)
        self.asked.setdefault(game, {})[state] = list(plan)
        return plan


def oracle_plans(
    game_files: Sequence[str | os.PathLike[str]],
    max_steps: int = 50,
    plan_dir: str | os.PathLike[str] | None = None,
) -> dict[str, dict[str, list[str]]]:
    """Every plan the planning oracle uses in one episode on each game (see the module docstring).

    Args:
        game_files: ``game.tw-pddl`` files (or trial folders).
        max_steps: the episode length (the evaluation protocol's 50).
        plan_dir: a plan cache folder to read and fill (default: none, every plan is searched).

    Returns:
        ``{game digest: {state digest: plan}}``.
    """
    cache = _RecordingPlanCache(plan_dir)
    env = ALFWorldEnv(game_files=game_files, max_steps=max_steps, plan_cache=cache)
    try:
        for index in range(len(env.games)):
            env.reset(seed=0, options={"game_index": index})
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(env.expert_next_action() or "look")
                done = terminated or truncated
    finally:
        env.close()
    return cache.asked


def write_plans(plans: dict[str, dict[str, list[str]]], path: str | os.PathLike[str] = SHIPPED_PLANS) -> Path:
    """Write ``plans`` as a shipped plans file (xz-compressed JSON, the planner's version, sorted keys)."""
    path = Path(path)
    text = json.dumps({"planner": planner_version(), "plans": plans}, sort_keys=True, separators=(",", ":"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))
    return path


def build_shipped_plans(
    path: str | os.PathLike[str] = SHIPPED_PLANS,
    splits: Sequence[str] = EVAL_SPLITS,
    workers: int = 1,
    progress: bool = True,
    plan_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Plan the oracle's episodes on every shipped game of ``splits`` and write the plans to ``path``.

    Args:
        path: the file to write (default: the package's
            :data:`~agentgym_credit.envs.alfworld.plans.SHIPPED_PLANS`).
        splits: the splits whose games are played.
        workers: processes that play games side by side (one game each at a time).
        progress: show a progress bar (one step per game).
        plan_dir: a plan cache folder to read and fill (the machine's, ``default_plan_dir()``, reuses the
            plans searched before; default: none, every plan is searched).
    """
    root = shipped_games_root()
    files = [str(r.game_file) for split in splits for r in find_games(split, data_path=root)]
    plans: dict[str, dict[str, list[str]]] = {}
    play = functools.partial(_one_game, plan_dir=None if plan_dir is None else str(plan_dir))
    with tqdm(total=len(files), desc="oracle plans", unit="game", smoothing=0.0, disable=not progress) as bar:
        if workers <= 1:
            found_each: Iterable[dict[str, dict[str, list[str]]]] = map(play, files)
        else:
            pool = ProcessPoolExecutor(workers)
            found_each = (future.result() for future in as_completed([pool.submit(play, f) for f in files]))
        for found in found_each:
            for game, by_state in found.items():
                plans.setdefault(game, {}).update(by_state)
            bar.update(1)
        if workers > 1:
            pool.shutdown()
    return write_plans(plans, path)


def _one_game(file: str, plan_dir: str | None) -> dict[str, dict[str, list[str]]]:
    return oracle_plans([file], plan_dir=plan_dir)
