"""``agc train``: train a policy with any credit estimator from the command line.

One flag per :class:`~agentgym_credit.baselines.config.TrainConfig` field (``--group-size`` for ``group_size``;
``--env``, ``--param KEY=VALUE`` and ``--env-kwarg KEY=VALUE`` for the environment id, the estimator's
parameters and the environment's arguments), each with its help text and choices::

    agc train --env Sokoban-Group-v0 --estimator gigpo --model tiny --iters 2 --out-dir runs/gigpo

A bad argument prints one line (``agc train: error: …``) and exits with status 2 before any work.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .config import TrainConfig, config_from_args
from .config import build_parser as config_parser
from .run_files import check_out_dir
from .trainer import train

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``agc train`` argument parser (one flag per :class:`~agentgym_credit.baselines.config.TrainConfig`
    field)."""
    return config_parser(TrainConfig, "agc train",
                         "PPO-clip policy-gradient trainer for LLM agents on group environments, with any credit "
                         "estimator.")


def main(argv: Sequence[str] | None = None) -> int:
    """``agc train``: parse flags into a :class:`~agentgym_credit.baselines.config.TrainConfig`, train, print the
    last metrics."""
    config = config_from_args(TrainConfig, build_parser().parse_args(list(sys.argv[1:] if argv is None else argv)))
    try:
        config.validate()
        check_out_dir(config)
    except (TypeError, ValueError) as exc:  # validate() only checks: no traceback of work is lost here
        print(f"agc train: error: {exc}", file=sys.stderr)
        return 2
    history = train(config)
    last = history[-1] if history else {}
    print(json.dumps({k: last[k] for k in ("iter", "success_rate", "mean_return", "loss") if k in last}))
    print(f"metrics: {Path(config.out_dir) / 'metrics.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
