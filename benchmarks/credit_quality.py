"""Credit quality against ground truth on Sokoban (and ALFWorld): ``agc run`` with this folder's results.

The benchmark lives in :mod:`agentgym_credit.evaluation.credit_quality` (so that ``agc run`` works from an
installed wheel); this script writes into ``benchmarks/results/credit_quality/``.

Usage: ``python benchmarks/credit_quality.py [--env sokoban --groups 32 --group-size 8 --epsilons 0.1 0.2 0.3 0.5
0.7 --reward shaped]``. Writes ``benchmarks/results/credit_quality/credit_quality.{md,csv,png}``
(``credit_quality_sparse.*`` with ``--reward sparse``,
``credit_quality_alfworld.*`` with ``--env alfworld``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentgym_credit.evaluation import credit_quality  # noqa: E402
from agentgym_credit.evaluation.credit_quality import (  # noqa: E402, F401  (the benchmark's API, as before)
    ESTIMATORS,
    evaluate,
    pairwise_accuracy,
    plot,
    rollout,
    tabular_critic,
)

RESULTS = Path(__file__).resolve().parent / "results" / "credit_quality"


def build_parser():
    """The script's flags: ``agc run``'s, with :data:`RESULTS` as the default output folder."""
    return credit_quality.build_parser(default_out=RESULTS, prog="python benchmarks/credit_quality.py")


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the benchmark with :data:`RESULTS` as the default output folder."""
    return credit_quality.main(argv, default_out=RESULTS, prog="python benchmarks/credit_quality.py")


if __name__ == "__main__":
    main()
