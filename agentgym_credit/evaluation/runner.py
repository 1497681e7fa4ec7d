"""Run a policy over an environment's evaluation set through the group vector env.

The wrapper stack is the training one, ``PromptObservations(ParseActions(gym.make_vec(env_id, …)))``:
the policy sees the papers' prompt and its response is parsed as in training (AppWorld, whose
protocol has no template, drops ``PromptObservations``: its observations are the prompts). The evaluation set
(:mod:`~agentgym_credit.evaluation.protocols`) is played in batches of ``batch_size`` tasks × ``samples``
members (one group per task, so ``samples > 1`` runs each task several times from the identical start);
each group is reset with its episode's seed and the options that pick its task. Every member acts once
per step until all have finished, so one batched policy call serves every active member.

:class:`Evaluator` keeps the environment open between calls, so a training loop can evaluate every N
iterations cheaply::

    evaluator = Evaluator("Sokoban-Group-v0", episodes=64)
    for it in range(iterations):
        ...  # one training iteration
        if it % 10 == 0:
            result = evaluator(lambda prompts: my_generate(prompts))
            print(it, result.headline)
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from agentgym_credit.evaluation.policies import EvalPolicy, PolicyStep, resolve_policy
from agentgym_credit.evaluation.protocols import (
    EpisodeResult,
    EpisodeSpec,
    EvalProtocol,
    EvaluationUnavailable,
    get_protocol,
)
from agentgym_credit.machine import machine_summary

__all__ = ["EvalResult", "Evaluator", "evaluate"]


@dataclass
class EvalResult:
    """The outcome of one evaluation.

    Attributes:
        env_id: the environment.
        split: the evaluation split (empty for Sokoban).
        policy: the policy's name.
        metrics: ``{table: {row: {column: value}}}`` (see :mod:`~agentgym_credit.evaluation.protocols`).
        headline: the protocol's headline metric.
        episodes: one :class:`~agentgym_credit.evaluation.protocols.EpisodeResult` per episode and sample.
        settings: seed, samples, max steps, temperature and timing.
    """

    env_id: str
    split: str
    policy: str
    metrics: dict[str, dict[str, dict[str, float]]]
    headline: float
    episodes: list[EpisodeResult] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, with_episodes: bool = True) -> dict[str, Any]:
        """A JSON-serializable dict."""
        out = asdict(self)
        if not with_episodes:
            out.pop("episodes")
        return out

    def to_markdown(self) -> str:
        """The metric tables as Markdown."""
        split = f" ({self.split})" if self.split else ""
        lines = [f"### {self.env_id}{split}: policy `{self.policy}`", ""]
        for table, rows in self.metrics.items():
            columns = list(dict.fromkeys(c for row in rows.values() for c in row))
            lines += [f"**{table}**", "", "| | " + " | ".join(columns) + " |",
                      "|---|" + "---:|" * len(columns)]
            for name, row in rows.items():
                cells = [_fmt(row.get(c)) for c in columns]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
            lines.append("")
        s = self.settings
        lines.append(f"{len(self.episodes)} episodes, seed {s.get('seed')}, samples {s.get('samples')}, "
                     f"max steps {s.get('max_steps')}, {s.get('elapsed_s', 0):.1f} s, {s.get('date', '')}")
        if s.get("env_kwargs"):
            lines[-1] += ", environment " + ", ".join(f"{k}={v}" for k, v in s["env_kwargs"].items())
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str | Path, stem: str | None = None) -> tuple[Path, Path]:
        """Write ``<stem>.json`` (with every episode) and ``<stem>.md``; returns both paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = stem or f"eval_{self.env_id}_{self.split or 'default'}_{_slug(self.policy)}"
        json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
        json_path.write_text(json.dumps(self.to_dict(), indent=2, default=_jsonable))
        md_path.write_text(self.to_markdown())
        return json_path, md_path


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return "–" if np.isnan(value) else f"{value:.1f}"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(text).name or text)[:40]


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _member_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    from agentgym_credit.wrappers import member_info

    return member_info(infos, i)


class Evaluator:
    """An open evaluation environment for one env and split (see the module docstring).

    Args:
        env_id: a registered group environment with a protocol.
        split: the evaluation split (default: the protocol's first).
        episodes: evaluate on the first ``episodes`` tasks (default: all; Sokoban 256 rooms).
        samples: runs per task (members per group); success rates average over them.
        batch_size: tasks played at once (groups of the vector env).
        seed: episode ``e`` is reset with seed ``seed + e``.
        max_steps: episode length (default: the papers').
        progress: show a tqdm progress bar.
        **env_kwargs: further member constructor arguments (e.g. ``cache_dir``, ``data_path``).

    Raises:
        EvaluationUnavailable: the environment is unknown, unregistered or its extra is missing.
    """

    def __init__(self, env_id: str, split: str | None = None, *, episodes: int | None = None, samples: int = 1,
                 batch_size: int = 16, seed: int = 0, max_steps: int | None = None, progress: bool = True,
                 **env_kwargs: Any) -> None:
        from agentgym_credit.wrappers import TEMPLATES, ParseActions, PromptObservations

        self.protocol: EvalProtocol = get_protocol(env_id)
        self.split = self.protocol.splits[0] if split is None else split
        if self.split not in self.protocol.splits and self.protocol.splits != ("",):
            raise ValueError(f"{env_id} is evaluated on {self.protocol.splits}, not {self.split!r}")
        if self.protocol.template is not None and self.protocol.template not in TEMPLATES:
            raise EvaluationUnavailable(f"no prompt template {self.protocol.template!r} for {env_id}")
        if samples < 1 or batch_size < 1:
            raise ValueError("samples and batch_size must be at least 1")
        self.env_id, self.samples, self.seed, self.progress = env_id, int(samples), int(seed), progress
        kwargs = self.protocol.env_kwargs(self.split if self.protocol.splits != ("",) else "")
        if max_steps is not None:
            kwargs["max_steps"] = int(max_steps)
        kwargs.update(env_kwargs)
        # what the caller changed from the protocol's environment (recorded with the results)
        self.env_kwargs = {**({} if max_steps is None else {"max_steps": int(max_steps)}), **env_kwargs}
        self.max_steps = kwargs["max_steps"]
        try:
            probe = gym.make(env_id, **kwargs).unwrapped
        except ImportError as exc:
            raise EvaluationUnavailable(f"{env_id} needs an extra that is not installed: {exc}") from exc
        self.specs: list[EpisodeSpec] = self.protocol.episodes(probe, self.split, self.seed, episodes)
        probe.close()
        self.batch_size = max(1, min(int(batch_size), len(self.specs)))
        vec = gym.make_vec(env_id, num_envs=self.batch_size * self.samples, group_size=self.samples,
                           vectorization_mode="vector_entry_point", **kwargs)
        self.vec = vec
        parsed = ParseActions(vec, fmt=self.protocol.fmt)
        self.env = parsed if self.protocol.template is None else PromptObservations(parsed, self.protocol.template)

    def close(self) -> None:
        """Close the environment."""
        self.env.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, policy: Any, **policy_kwargs: Any) -> EvalResult:
        """Evaluate ``policy`` (anything :func:`~agentgym_credit.evaluation.resolve_policy` accepts)."""
        return self.run(policy, **policy_kwargs)

    def run(self, policy: Any, **policy_kwargs: Any) -> EvalResult:
        """Evaluate ``policy`` on every episode (see :meth:`__call__`)."""
        agent: EvalPolicy = resolve_policy(policy, seed=self.seed, **policy_kwargs)
        start = time.perf_counter()
        results: list[EpisodeResult] = []
        bar = tqdm(total=len(self.specs) * self.samples, desc=f"eval {self.env_id} {agent.name}",
                   disable=not self.progress, leave=False)
        for lo in range(0, len(self.specs), self.batch_size):
            results.extend(self._run_batch(agent, self.specs[lo: lo + self.batch_size], bar))
        bar.close()
        results.sort(key=lambda r: (r.index, r.sample))
        metrics = self.protocol.metrics(results)
        table, row, column = self.protocol.headline
        settings = {
            "seed": self.seed, "samples": self.samples, "max_steps": self.max_steps,
            "env_kwargs": {k: v for k, v in self.env_kwargs.items() if _is_json(v)},
            "batch_size": self.batch_size, "temperature": policy_kwargs.get("temperature", 0.0),
            "elapsed_s": time.perf_counter() - start, "episodes": len(self.specs),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine_summary(),
        }
        return EvalResult(self.env_id, self.split, agent.name, metrics,
                          float(metrics[table][row][column]), results, settings)

    def _run_batch(self, agent: EvalPolicy, specs: Sequence[EpisodeSpec], bar: Any) -> list[EpisodeResult]:
        n, k = len(specs), self.samples
        seeds = [s.seed for s in specs] + [0] * (self.batch_size - n)
        infos: dict[str, Any] = {}
        prompts: Sequence[str] = ()
        for g, spec in enumerate(specs):  # one reset per task: its options pick the task
            mask = np.zeros(self.vec.num_envs, dtype=bool)
            mask[g * k:(g + 1) * k] = True
            prompts, infos = self.env.reset(seed=seeds, options={**spec.options, "reset_mask": mask})
        members = list(range(n * k))
        episode_of = {m: (specs[m // k].index, m % k) for m in members}
        for m in members:
            agent.start(m, *episode_of[m], _member_info(infos, m), self.vec)
        totals = dict.fromkeys(members, 0.0)
        steps = dict.fromkeys(members, 0)
        invalid = dict.fromkeys(members, 0)
        last = {m: _member_info(infos, m) for m in members}
        active = list(members)
        step = 0
        while active:
            responses = agent.act(PolicyStep(active, [prompts[m] for m in active], [last[m] for m in active],
                                             [episode_of[m] for m in active], self.vec, self.protocol.fmt, step))
            actions = [""] * self.vec.num_envs
            for m, response in zip(active, responses, strict=True):
                actions[m] = response
            prompts, rewards, terminated, truncated, infos = self.env.step(actions)
            still = []
            for m in active:
                info = _member_info(infos, m)
                last[m] = info
                totals[m] += float(rewards[m])
                steps[m] += 1
                invalid[m] += int(not info.get("action_valid", True))
                if terminated[m] or truncated[m]:
                    bar.update(1)
                else:
                    still.append(m)
            active = still
            step += 1
        out = []
        for m in members:
            spec = specs[m // k]
            kept = {key: _jsonable(last[m][key]) if isinstance(last[m][key], np.generic) else last[m][key]
                    for key in self.protocol.info_keys if key in last[m]}
            out.append(EpisodeResult(spec.index, m % k, spec.seed, str(last[m].get("task_id", "")),
                                     bool(last[m].get("won", False)), totals[m], steps[m], invalid[m],
                                     {**kept, **spec.meta}))
        return out


def evaluate(policy: Any, env_id: str, split: str | None = None, *, episodes: int | None = None,
             samples: int = 1, batch_size: int = 16, seed: int = 0, max_steps: int | None = None,
             temperature: float = 0.0, max_new_tokens: int = 128, device: str = "cpu", progress: bool = True,
             precision: str = "float32", **env_kwargs: Any) -> EvalResult:
    """Evaluate ``policy`` on ``env_id``'s evaluation split with the papers' metrics (one-shot :class:`Evaluator`).

    Args:
        policy: ``"random"``, ``"oracle"``, a model folder / name / training run folder, ``"module:function"``,
            a callable ``prompts -> responses`` or an :class:`~agentgym_credit.evaluation.policies.EvalPolicy`.
        env_id, split, episodes, samples, batch_size, seed, max_steps, progress, env_kwargs: see
            :class:`Evaluator`.
        temperature: sampling temperature of model policies (0 = greedy).
        max_new_tokens: response budget of model policies.
        device: where a model policy runs.
        precision: forward passes of a model policy loaded from a name or folder (``"float32"``,
            ``"bfloat16"``, ``"auto"``).
    """
    with Evaluator(env_id, split, episodes=episodes, samples=samples, batch_size=batch_size, seed=seed,
                   max_steps=max_steps, progress=progress, **env_kwargs) as evaluator:
        return evaluator.run(policy, temperature=temperature, max_new_tokens=max_new_tokens, device=device,
                             precision=precision)


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
