"""ALFWorld speed: our ``ALFWorld-Group-v0`` env against upstream ``AlfredTWEnv``, same games, same actions.

Upstream is used as its users use it: ``AlfredTWEnv(config).init_env(batch_size=1)`` with a dict
config whose ``data_path`` points at generated games (the set shipped with the package by default,
extracted to a temporary folder). Upstream's game order decides the games; our env resets to the same
game (``options={"game_index": i}``). Each episode plays the same commands in both envs: a few random
admissible commands (seeded, drawn from the identical admissible lists), one garbage command, then the
game's walkthrough. Every observation, admissible-command list, score and ``won`` flag is compared: the
script fails if one transcript differs.

Timings (wall clock, this process, 1 thread):

* steps/s: ``env.step`` of each env, over every command played;
* resets/s: upstream ``env.reset()`` (loads and translates the game); ours cold (first reset of a game
  in the process: compiles it) and warm (a game reset again: cached).

Usage: ``python benchmarks/alfworld_speed.py [--split train --games 12 --rounds 2 --random-actions 3]``
(``--data-path DIR`` to use other games, e.g. from ``agc alfworld generate``; ``--games`` plays the
first games of the split in id order, copied into a temporary folder that upstream reads).
Writes ``benchmarks/results/alfworld_speed/alfworld_speed.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentgym_credit.envs.alfworld.data import extract_shipped_games, find_games  # noqa: E402
from agentgym_credit.envs.alfworld.engine import SHARED_GAME_CACHE  # noqa: E402
from agentgym_credit.envs.alfworld.env import ALFWorldEnv  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "alfworld_speed"
GARBAGE = "xyzzy the lamp with enthusiasm"


def upstream_config(split_folder: Path, max_steps: int = 200) -> dict:
    """A dict config for upstream ``AlfredTWEnv`` reading every task type from ``split_folder``."""
    return {
        "env": {
            "type": "AlfredTWEnv",
            "goal_desc_human_anns_prob": 0.0,
            "task_types": [1, 2, 3, 4, 5, 6],
            "domain_randomization": False,
            "expert_type": "handcoded",
        },
        "dataset": {
            "data_path": str(split_folder),
            "eval_id_data_path": str(split_folder),
            "eval_ood_data_path": str(split_folder),
            "num_train_games": -1,
            "num_eval_games": -1,
        },
        "logic": {"domain": "", "grammar": ""},
        "general": {"training_method": "dqn"},
        "rl": {"training": {"max_nb_steps_per_episode": max_steps}},
    }


def first_games(split_folder: Path, n: int, dest: Path) -> Path:
    """Copy the first ``n`` games of ``split_folder`` (in id order) into ``dest``; returns ``dest``."""
    for record in find_games(data_path=split_folder)[:n]:
        shutil.copytree(record.game_file.parent, dest / record.game_id)
    return dest


def make_upstream_env(split_folder: Path):
    """Upstream ``AlfredTWEnv`` (its console chatter silenced) and its batch-of-one TextWorld env."""
    from alfworld.agents.environment import get_environment

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        alfred = get_environment("AlfredTWEnv")(upstream_config(split_folder), train_eval="train")
        env = alfred.init_env(batch_size=1)
    return alfred, env


@dataclass
class Timings:
    """Wall-clock samples, in seconds."""

    upstream_steps: list[float] = field(default_factory=list)
    our_steps: list[float] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    upstream_resets: list[float] = field(default_factory=list)
    our_cold_resets: list[float] = field(default_factory=list)
    our_warm_resets: list[float] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    episodes: int = 0
    won: int = 0


def _compare(where: str, up: tuple, ours: tuple, timings: Timings) -> None:
    if up != ours:
        timings.mismatches.append(f"{where}: upstream={up!r} ours={ours!r}")


def run(split_folder: Path, rounds: int, random_actions: int, seed: int) -> Timings:
    """Play every game of ``split_folder`` ``rounds`` times in both envs, comparing transcripts."""
    _, upstream = make_upstream_env(split_folder)
    records = find_games(data_path=split_folder)
    index = {str(r.game_file): i for i, r in enumerate(records)}
    ours = ALFWorldEnv(game_files=[r.game_file for r in records], max_steps=10_000)
    rng = random.Random(seed)
    timings = Timings()
    seen: set[str] = set()
    for _ in range(rounds * len(records)):
        start = time.perf_counter()
        obs, infos = upstream.reset()
        timings.upstream_resets.append(time.perf_counter() - start)
        game_file = infos["extra.gamefile"][0]
        start = time.perf_counter()
        our_obs, info = ours.reset(options={"game_index": index[game_file]})
        (timings.our_warm_resets if game_file in seen else timings.our_cold_resets).append(
            time.perf_counter() - start
        )
        seen.add(game_file)
        name = ours.game.game_id
        _compare(
            f"{name} reset",
            (obs[0], infos["admissible_commands"][0]),
            (our_obs, info["admissible_actions"]),
            timings,
        )

        commands = [rng.choice(infos["admissible_commands"][0]) for _ in range(random_actions)]
        commands.append(GARBAGE)
        commands += ours.walkthrough
        for t, command in enumerate(commands):
            start = time.perf_counter()
            obs, scores, dones, infos = upstream.step([command])
            timings.upstream_steps.append(time.perf_counter() - start)
            start = time.perf_counter()
            our_obs, reward, terminated, truncated, info = ours.step(command)
            timings.our_steps.append(time.perf_counter() - start)
            timings.valid.append(bool(info["action_valid"]))
            _compare(
                f"{name} step {t} {command!r}",
                (obs[0], infos["admissible_commands"][0], bool(infos["won"][0]), float(scores[0])),
                (our_obs, info["admissible_actions"], info["won"], reward / 10.0),
                timings,
            )
            if terminated:
                break
        timings.episodes += 1
        timings.won += int(info["won"])
    upstream.close()
    ours.close()
    return timings


def _rate(samples: list[float]) -> float:
    return len(samples) / sum(samples) if samples and sum(samples) > 0 else float("nan")


def report(t: Timings, games: int, source: str, load: str = "") -> str:
    """The Markdown report of a run (``load``: the machine's load average, said next to the figures)."""
    up_step, our_step = _rate(t.upstream_steps), _rate(t.our_steps)
    up_valid = _rate([x for x, ok in zip(t.upstream_steps, t.valid, strict=True) if ok])
    our_valid = _rate([x for x, ok in zip(t.our_steps, t.valid, strict=True) if ok])
    up_reset, cold, warm = _rate(t.upstream_resets), _rate(t.our_cold_resets), _rate(t.our_warm_resets)
    ms = lambda xs: 1000 * statistics.median(xs) if xs else float("nan")  # noqa: E731
    identical = "yes" if not t.mismatches else f"NO ({len(t.mismatches)} differences)"
    lines = [
        "# ALFWorld speed: ALFWorld-Group-v0 vs upstream AlfredTWEnv",
        "",
        f"Games: {games} ({source}); episodes: {t.episodes} (won: {t.won}); steps: {len(t.our_steps)} per env "
        f"({sum(t.valid)} admissible, {len(t.valid) - sum(t.valid)} not: ours answers those without the engine).",
        f"Transcripts identical (observations, admissible commands, won, score): **{identical}**.",
        *([load, ""] if load else [""]),
        "| measure | upstream AlfredTWEnv | ALFWorld-Group-v0 | ratio |",
        "|---|---:|---:|---:|",
        f"| steps/s | {up_step:.1f} | {our_step:.1f} | {our_step / up_step:.1f}x |",
        f"| steps/s, admissible commands only | {up_valid:.1f} | {our_valid:.1f} | {our_valid / up_valid:.1f}x |",
        f"| median step (ms) | {ms(t.upstream_steps):.1f} | {ms(t.our_steps):.2f} | |",
        f"| resets/s (ours: first reset of a game) | {up_reset:.2f} | {cold:.2f} | {cold / up_reset:.1f}x |",
        f"| resets/s (ours: game seen before) | {up_reset:.2f} | {warm:.1f} | {warm / up_reset:.1f}x |",
        "",
        f"Compiled-game cache: {SHARED_GAME_CACHE.hits} hits, {SHARED_GAME_CACHE.misses} misses.",
    ]
    if t.mismatches:
        lines += ["", "First differences:", ""] + [f"- {m}" for m in t.mismatches[:5]]
    return "\n".join(lines) + "\n"


def _machine_load(started: float) -> str:
    """The date and the load average at the start and the end of the run (both envs share the contention)."""
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (f"Measured {date} on {os.cpu_count()} cores shared with other jobs: load average {started:.1f} at the "
            f"start, {os.getloadavg()[0]:.1f} at the end; both envs ran interleaved, so the ratios hold better "
            f"than the absolute rates.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--data-path", help="a json_2.1.1 folder (default: the shipped games)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--games", type=int, default=12, help="play the first N games of the split (0: all)")
    parser.add_argument("--rounds", type=int, default=2, help="times each game is played")
    parser.add_argument("--random-actions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "alfworld_speed.md"))
    args = parser.parse_args(argv)

    started = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="alfworld-speed-") as tmp:
        root = Path(args.data_path) if args.data_path else extract_shipped_games(tmp)
        source = args.data_path or "shipped generated set"
        split_folder = root / args.split
        if args.games > 0:
            split_folder = first_games(split_folder, args.games, Path(tmp) / "subset" / args.split)
        games = len(find_games(data_path=split_folder))
        timings = run(split_folder, args.rounds, args.random_actions, args.seed)
    text = report(timings, games, f"{source}, split {args.split}", _machine_load(started))
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    return 1 if timings.mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
