"""Checks on logged training rows (``rollouts.jsonl``, ``llm_compare --train-transcripts``)."""

from __future__ import annotations

import numpy as np
import pytest


def dr_grpo_matches(rows: list[dict]) -> bool:
    """Whether each row's logged advantage is Dr. GRPO's (``grpo`` with ``norm=none``, statistics over episodes)
    with the invalid-action penalty charged to its row: the episode's return less the row's own penalty, minus
    the mean over the group's episodes of their rows' mean score."""
    returns: dict[tuple[int, int], float] = {}
    for r in rows:
        returns[r["group"], r["traj"]] = returns.get((r["group"], r["traj"]), 0.0) + r["reward"]
    scores: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        scores.setdefault((r["group"], r["traj"]), []).append(returns[r["group"], r["traj"]] - r["penalty"])
    for r in rows:
        group = [np.mean(v) for (g, _), v in scores.items() if g == r["group"]]
        expected = returns[r["group"], r["traj"]] - r["penalty"] - np.mean(group)
        if r["advantage"] != pytest.approx(expected, abs=1e-9):
            return False
    return True
