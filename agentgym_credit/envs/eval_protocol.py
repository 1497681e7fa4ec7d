"""Evaluation protocol records: which episodes an environment is evaluated on and how they are scored.

An :class:`EvalProtocol` fixes an environment's evaluation split(s) and episodes, the papers' episode length,
the prompt template and response format, and the metric tables computed from each episode's last ``info``.
Each environment family defines its protocol in its folder (``agentgym_credit/envs/<name>/spec.py``) and
registers it with its :class:`~agentgym_credit.envs.spec.EnvFamilySpec`; the evaluation runner
(:mod:`agentgym_credit.evaluation.runner`) plays it. The helpers here are the table builders the
protocols share: rates as percentages in [0, 100], one row per group of episodes plus ``All``, each row
with ``n``, the number of episodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EpisodeResult",
    "EpisodeSpec",
    "EvalProtocol",
    "first_n",
    "grouped",
    "rate",
    "seeded_episodes",
    "success_rows",
    "success_table",
]


@dataclass(frozen=True)
class EpisodeSpec:
    """One evaluation episode: the reset seed, the reset options that pick the task, and task metadata.

    Attributes:
        index: position in the evaluation set.
        seed: the member's reset seed.
        options: reset options (e.g. ``{"game_index": 3}``); empty when the seed picks the task.
        meta: task facts known before the episode (e.g. ``{"hops": 2}``), copied into the result.
    """

    index: int
    seed: int
    options: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeResult:
    """The outcome of one evaluated episode (one sample of one task).

    Attributes:
        index: the episode's position in the evaluation set.
        sample: which of the ``samples`` runs of the task this is.
        seed: the reset seed.
        task_id: ``info["task_id"]``.
        won: ``info["won"]`` at the end.
        reward: the summed environment reward.
        steps: steps taken.
        invalid_steps: steps whose response or action was invalid.
        info: the metric keys of the last ``info`` plus the spec's ``meta``.
    """

    index: int
    sample: int
    seed: int
    task_id: str
    won: bool
    reward: float
    steps: int
    invalid_steps: int
    info: dict[str, Any] = field(default_factory=dict)


MetricTables = dict[str, dict[str, dict[str, float]]]
"""``{table: {row: {column: value}}}``."""


@dataclass(frozen=True)
class EvalProtocol:
    """How one environment is evaluated.

    Attributes:
        env_id: the registered group environment.
        template: the prompt template of :class:`~agentgym_credit.wrappers.PromptObservations`, or None
            where the environment's observations are the prompts.
        fmt: the response format of :class:`~agentgym_credit.wrappers.ParseActions`.
        max_steps: the papers' episode length.
        splits: evaluation splits; the first is the default (``("",)``: the environment has none).
        info_keys: keys of the last ``info`` kept in each :class:`EpisodeResult`.
        headline: the metric (table, row, column) shown in summaries.
        episodes_fn: ``(unwrapped member of the split, split, seed, limit) -> episodes``.
        metrics_fn: ``results -> tables`` (:data:`MetricTables`).
        parallel: play the tasks of a batch in worker processes by default, one per free core (a task's
            reset costs seconds: ALFWorld translates its game's PDDL problem).
    """

    env_id: str
    template: str | None
    fmt: str
    max_steps: int
    splits: tuple[str, ...]
    info_keys: tuple[str, ...]
    headline: tuple[str, str, str]
    episodes_fn: Callable[[Any, str, int, int | None], list[EpisodeSpec]]
    metrics_fn: Callable[[Sequence[EpisodeResult]], MetricTables]
    parallel: bool = False

    def env_kwargs(self, split: str) -> dict[str, Any]:
        """Member constructor arguments for ``split`` (empty split: the env has none)."""
        kwargs: dict[str, Any] = {"max_steps": self.max_steps}
        if split:
            kwargs["split"] = split
        return kwargs

    def episodes(self, member: Any, split: str, seed: int, limit: int | None) -> list[EpisodeSpec]:
        """The evaluation episodes, read from one unwrapped member env of the split."""
        return self.episodes_fn(member, split, seed, limit)

    def metrics(self, results: Sequence[EpisodeResult]) -> MetricTables:
        """Tables ``{table: {row: {column: value}}}`` of the papers' metrics."""
        return self.metrics_fn(results)


def first_n(n: int, limit: int | None) -> int:
    """How many of ``n`` tasks are evaluated: all, or the first ``limit``."""
    return n if limit is None else min(n, int(limit))


def seeded_episodes(default: int) -> Callable[[Any, str, int, int | None], list[EpisodeSpec]]:
    """Episodes of an environment without a split: ``limit`` (default ``default``) tasks drawn from seeds
    ``seed, seed + 1, …``."""

    def episodes(member: Any, split: str, seed: int, limit: int | None) -> list[EpisodeSpec]:
        n = default if limit is None else int(limit)
        return [EpisodeSpec(i, seed + i) for i in range(n)]

    return episodes


def rate(values: Sequence[bool | float]) -> float:
    """The mean of ``values`` as a percentage (NaN for none)."""
    return 100.0 * sum(float(v) for v in values) / len(values) if values else float("nan")


def grouped(results: Sequence[EpisodeResult], key: Callable[[EpisodeResult], Any]) -> dict[Any, list[EpisodeResult]]:
    """The results by ``key``, in first-seen order."""
    groups: dict[Any, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        groups[key(r)].append(r)
    return groups


def success_rows(results: Sequence[EpisodeResult], key: Callable[[EpisodeResult], Any],
                 order: Sequence[Any] | None = None, label: Callable[[Any], str] = str) -> dict[str, dict]:
    """One ``{"success", "n"}`` row per value of ``key`` (in ``order``, else sorted), then ``All``."""
    groups = grouped(results, key)
    keys = list(order) if order is not None else sorted(groups, key=str)
    rows = {label(k): {"success": rate([r.won for r in groups[k]]), "n": len(groups[k])}
            for k in keys if groups.get(k)}
    rows["All"] = {"success": rate([r.won for r in results]), "n": len(results)}
    return rows


def success_table(results: Sequence[EpisodeResult]) -> MetricTables:
    """The success rate over every episode: ``{"overall": {"All": {"success", "n"}}}``."""
    return {"overall": {"All": {"success": rate([r.won for r in results]), "n": len(results)}}}
