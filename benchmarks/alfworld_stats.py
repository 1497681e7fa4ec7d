"""ALFWorld game-set statistics: how a folder of games is distributed, and how upstream's expert does on it.

Prints, for every split of a ``json_2.1.1`` folder (the set shipped with the package by default),
the table of :func:`agentgym_credit.envs.alfworld.stats.format_table`: task shares, scenes, lamps of
look tasks, kitchen receptacles present, most instances of one class, goal wordings used, walkthrough
source and length. Works on real ALFWorld data too (``--data-path $ALFWORLD_DATA``).

With ``--expert`` it also plays upstream ALFWorld's hand-coded expert on every game of the chosen
splits, the way upstream runs it: ``AlfredTWEnv`` (configured for DAgger training, so that each
step's ``extra.expert_plan`` holds the expert's next command) on upstream's own TextWorld engine,
Python's global ``random`` seeded with ``--seed``, at most 200 steps per game. The expert is
randomised (it draws among objects and breaks repetitions at random), so its win rate on games it
has solved once is below 100 %; the figure is reported per split.

Usage: ``python benchmarks/alfworld_stats.py [--data-path DIR] [--expert --expert-splits valid_seen valid_unseen]``.
Writes ``benchmarks/results/alfworld_stats/alfworld_stats.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm.auto import tqdm  # noqa: E402

from agentgym_credit.envs.alfworld.data import scan_games, shipped_games_root  # noqa: E402
from agentgym_credit.envs.alfworld.stats import collect_stats, format_table  # noqa: E402
from benchmarks.alfworld_speed import first_games, upstream_config  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "alfworld_stats"
_EXPERT_STEPS = 200


def upstream_expert_env(split_folder: Path):
    """Upstream ``AlfredTWEnv`` in DAgger mode (``extra.expert_plan`` is the hand-coded expert's next command)."""
    from alfworld.agents.environment import get_environment

    config = upstream_config(split_folder, max_steps=_EXPERT_STEPS)
    config["general"]["training_method"] = "dagger"
    config["dagger"] = {"training": {"max_nb_steps_per_episode": _EXPERT_STEPS}}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        alfred = get_environment("AlfredTWEnv")(config, train_eval="train")
        return alfred, alfred.init_env(batch_size=1)


def expert_win_rate(split_folder: Path, seed: int = 0, progress: bool = True) -> tuple[int, int, list[int]]:
    """Play upstream's hand-coded expert once on every game of ``split_folder``.

    Returns:
        ``(won, games, lengths)``: games won, games played, and the commands played per game.
    """
    state = random.getstate()
    random.seed(seed)  # before the env starts: its worker process inherits the seeded generator
    alfred, env = upstream_expert_env(split_folder)
    won, lengths = 0, []
    try:
        for _ in tqdm(
            range(len(alfred.game_files)), desc=f"expert {split_folder.name}", disable=not progress
        ):
            _, infos = env.reset()
            done, steps = False, 0
            while not done and steps < _EXPERT_STEPS:
                _, _, dones, infos = env.step([infos["extra.expert_plan"][0][0]])
                done, steps = dones[0], steps + 1
            won += int(infos["won"][0])
            lengths.append(steps)
    finally:
        random.setstate(state)
        env.close()
    return won, len(lengths), lengths


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument(
        "--data-path", help="a json_2.1.1 folder, its parent or a folder of games (default: the shipped set)"
    )
    parser.add_argument("--expert", action="store_true", help="also measure upstream's hand-coded expert")
    parser.add_argument("--expert-splits", nargs="+", default=["valid_seen", "valid_unseen"])
    parser.add_argument(
        "--expert-games", type=int, default=0, help="the first N games of each split (0: all)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "alfworld_stats.md"))
    args = parser.parse_args(argv)

    root = Path(args.data_path) if args.data_path else shipped_games_root().parent
    source = args.data_path or "the set shipped with the package"
    stats = collect_stats(root)
    lines = ["# ALFWorld game-set statistics", "", f"Games: {source}.", "", format_table(stats), ""]
    if args.expert:
        base = root / "json_2.1.1" if (root / "json_2.1.1").is_dir() else root
        lines += [
            f"Upstream hand-coded expert (AlfredTWEnv, DAgger mode, upstream engine, global random seed "
            f"{args.seed}, at most {_EXPERT_STEPS} steps):",
            "",
            "| split | games | won | win rate | mean commands |",
            "|---|---:|---:|---:|---:|",
        ]
        for split in args.expert_splits:
            if not scan_games(base / split):
                continue
            with tempfile.TemporaryDirectory(prefix="alfworld-expert-") as tmp:
                folder = base / split
                if args.expert_games > 0:
                    folder = first_games(folder, args.expert_games, Path(tmp) / split)
                won, games, lengths = expert_win_rate(folder, args.seed)
            lines.append(
                f"| {split} | {games} | {won} | {100.0 * won / games:.1f} % | {sum(lengths) / games:.1f} |"
            )
        lines.append("")
    text = "\n".join(lines)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    return text


if __name__ == "__main__":
    main()
