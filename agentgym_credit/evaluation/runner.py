"""Run a policy over an environment's evaluation set through the group vector env.

The wrapper stack is the training one, ``PromptObservations(ParseActions(gym.make_vec(env_id, …)))``:
the policy sees the papers' prompt and its response is parsed as in training (AppWorld, whose
protocol has no template, drops ``PromptObservations``: its observations are the prompts). The evaluation set
(:mod:`~agentgym_credit.evaluation.protocols`) is played in batches of ``batch_size`` tasks × ``samples``
members (one group per task, so ``samples > 1`` runs each task several times from the identical start);
each group is reset with its episode's seed and the options that pick its task. Every member acts once
per step until all have finished, so one batched policy call serves every active member.

``tasks="seeded"`` plays the environment as its arguments configure it (no protocol split or episode length)
on tasks drawn from the reset seeds ``seed, seed + 1, …``, with the prompt of the trainer's rollouts
(:func:`~agentgym_credit.baselines.rollout.make_group_env`): :func:`held_out` measures a trained policy
that way on seeds far from the training ones. ``record=True`` keeps every step (what the policy was
prompted with before the template, its response, the executed action, reward, validity, penalty and the
episode's outcome) in :attr:`EvalResult.transcript`.

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

from agentgym_credit.argtypes import close_match
from agentgym_credit.envs.eval_protocol import success_table
from agentgym_credit.envs.group_vector import check_group_env_kwargs, group_env_options
from agentgym_credit.errors import UnknownSplitError
from agentgym_credit.evaluation.policies import EvalPolicy, PolicyStep, check_policy, resolve_policy
from agentgym_credit.evaluation.protocols import (
    PROTOCOLS,
    EpisodeResult,
    EpisodeSpec,
    EvalProtocol,
    EvaluationUnavailable,
    get_protocol,
)
from agentgym_credit.machine import free_cores, machine_summary
from agentgym_credit.wrappers.prompting import TEMPLATES

__all__ = ["EvalResult", "Evaluator", "TASK_MODES", "check_split", "evaluate", "held_out"]

TASK_MODES = ("split", "seeded")
"""How :class:`Evaluator` picks its episodes: the protocol's split, or tasks drawn from reset seeds."""


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
        transcript: with ``record=True``, one dict per step (see the module docstring).
    """

    env_id: str
    split: str
    policy: str
    metrics: dict[str, dict[str, dict[str, float]]]
    headline: float
    episodes: list[EpisodeResult] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    transcript: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self, with_episodes: bool = True) -> dict[str, Any]:
        """A JSON-serializable dict (the transcript only when one was recorded)."""
        out = asdict(self)
        if not with_episodes:
            out.pop("episodes")
        if not self.transcript:
            out.pop("transcript")
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
        if self.metrics:
            lines += ["Every column but n (the episodes of the row) is a percentage, 0–100.", ""]
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
        env_id: a registered group environment with a protocol (``tasks="seeded"``: with a prompt template).
        split: the evaluation split (default: the protocol's first).
        episodes: evaluate on the first ``episodes`` tasks (default: all; Sokoban 256 rooms); required with
            ``tasks="seeded"``.
        samples: runs per task (members per group); success rates average over them.
        batch_size: tasks played at once (groups of the vector env).
        seed: episode ``e`` is reset with seed ``seed + e``.
        max_steps: episode length (default: the papers'; ``tasks="seeded"``: the environment's).
        progress: show a tqdm progress bar.
        tasks: ``"split"`` (the protocol's) or ``"seeded"`` (see the module docstring).
        template: the prompt template (default: the protocol's; ``tasks="seeded"``: the family's).
        history_length: steps shown in the prompt (default: the template's).
        record: keep every step in :attr:`EvalResult.transcript`.
        workers: worker processes that play the members of a batch side by side (the group env's
            ``num_workers``; default: one per free core where the protocol is ``parallel``, else 0).
        **env_kwargs: further member constructor arguments (e.g. ``cache_dir``, ``data_path``).

    Raises:
        EvaluationUnavailable: the environment is unknown, unregistered or its extra is missing.
        UnknownSplitError: ``split`` is not one of the protocol's splits.
        TypeError: an environment argument names nothing the environment takes, or has the wrong type.
    """

    def __init__(self, env_id: str, split: str | None = None, *, episodes: int | None = None, samples: int = 1,
                 batch_size: int = 16, seed: int = 0, max_steps: int | None = None, progress: bool = True,
                 tasks: str = "split", template: str | None = None, history_length: int | None = None,
                 record: bool = False, workers: int | None = None, **env_kwargs: Any) -> None:
        from agentgym_credit.envs.spec import family_of_template, response_format, template_for
        from agentgym_credit.wrappers import ParseActions, PromptObservations, RecordStepBatch

        if tasks not in TASK_MODES:
            raise ValueError(f"tasks must be one of {TASK_MODES}, got {tasks!r}")
        if samples < 1 or batch_size < 1:
            raise ValueError("samples and batch_size must be at least 1")
        self.env_id, self.samples, self.seed, self.progress = env_id, int(samples), int(seed), progress
        self.record = bool(record)
        if tasks == "split":
            self.protocol: EvalProtocol | None = get_protocol(env_id)
            self.split = check_split(self.protocol, split)
            template = self.protocol.template if template is None else template
            self.fmt = self.protocol.fmt
            kwargs = self.protocol.env_kwargs(self.split if self.protocol.splits != ("",) else "")
        else:
            import agentgym_credit  # noqa: F401  (registers the environments)

            if env_id not in gym.registry:
                raise EvaluationUnavailable(f"{env_id} is not registered in this installation, so it cannot be "
                                            "evaluated")
            if episodes is None:
                raise ValueError("tasks='seeded' draws `episodes` tasks from seeds: pass episodes=")
            self.protocol = PROTOCOLS.get(env_id)
            self.split = str(env_kwargs.get("split", "") if split is None else split)
            template = template_for(env_id) if template is None else template
            self.fmt = response_format(template)
            kwargs = {} if split is None else {"split": split}
        if template is not None and template not in TEMPLATES:
            raise EvaluationUnavailable(f"no prompt template {template!r} for {env_id}")
        if max_steps is not None:
            kwargs["max_steps"] = int(max_steps)
        kwargs.update(env_kwargs)
        # what the caller changed from the protocol's environment (recorded with the results)
        self.env_kwargs = {**({} if max_steps is None else {"max_steps": int(max_steps)}), **env_kwargs}
        self.max_steps = kwargs.get("max_steps")
        check_group_env_kwargs(env_id, kwargs)
        member_kwargs = {k: v for k, v in kwargs.items() if k not in group_env_options()}
        if self.protocol is not None and tasks == "split":
            try:
                probe = gym.make(env_id, **member_kwargs).unwrapped
            except ImportError as exc:
                raise EvaluationUnavailable(f"{env_id} needs an extra that is not installed: {exc}") from exc
            self.specs: list[EpisodeSpec] = self.protocol.episodes(probe, self.split, self.seed, episodes)
            probe.close()
        else:
            self.specs = [EpisodeSpec(i, self.seed + i) for i in range(int(episodes or 0))]
        self.batch_size = max(1, min(int(batch_size), len(self.specs)))
        if "num_workers" not in kwargs:
            if workers is None:
                parallel = self.protocol is not None and self.protocol.parallel
                cores = free_cores() if parallel else 1
                workers = cores if cores > 1 else 0
            if workers < 0:
                raise ValueError(f"workers must be >= 0 (0 = the members play in this process), "
                                 f"got {workers}")
            kwargs["num_workers"] = min(int(workers), self.batch_size * self.samples)
        self.workers = int(kwargs["num_workers"])
        try:
            vec = gym.make_vec(env_id, num_envs=self.batch_size * self.samples, group_size=self.samples,
                               vectorization_mode="vector_entry_point", **kwargs)
        except ImportError as exc:
            raise EvaluationUnavailable(f"{env_id} needs an extra that is not installed: {exc}") from exc
        self.vec = vec
        penalty = None if template is None else family_of_template(template).invalid_penalty
        parsed = ParseActions(vec, fmt=self.fmt, penalty=penalty)
        prompted = parsed if template is None else PromptObservations(parsed, template, history_length=history_length)
        self.env = RecordStepBatch(prompted, include_penalty="return") if self.record else prompted

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
        self._transcript: list[dict[str, Any]] = []
        # smoothing=0: the estimate is the mean time per finished episode so far (episodes end in batches)
        bar = tqdm(total=len(self.specs) * self.samples, desc=f"eval {self.env_id} {agent.name}",
                   unit="episode", smoothing=0.0, disable=not self.progress, leave=False)
        for lo in range(0, len(self.specs), self.batch_size):
            results.extend(self._run_batch(agent, self.specs[lo: lo + self.batch_size], bar))
        bar.close()
        results.sort(key=lambda r: (r.index, r.sample))
        metrics = success_table(results) if self.protocol is None else self.protocol.metrics(results)
        table, row, column = ("overall", "All", "success") if self.protocol is None else self.protocol.headline
        settings = {
            "seed": self.seed, "samples": self.samples, "max_steps": self.max_steps,
            "env_kwargs": {k: v for k, v in self.env_kwargs.items() if _is_json(v)},
            "batch_size": self.batch_size, "workers": self.workers,
            "temperature": policy_kwargs.get("temperature", 0.0),
            "elapsed_s": time.perf_counter() - start, "episodes": len(self.specs),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine_summary(),
        }
        return EvalResult(self.env_id, self.split, agent.name, metrics,
                          float(metrics[table][row][column]), results, settings, self._transcript)

    def _run_batch(self, agent: EvalPolicy, specs: Sequence[EpisodeSpec], bar: Any) -> list[EpisodeResult]:
        n, k = len(specs), self.samples
        seeds = [s.seed for s in specs] + [0] * (self.batch_size - n)
        infos: dict[str, Any] = {}
        prompts: Sequence[str] = ()
        mask = np.zeros(self.vec.num_envs, dtype=bool)
        mask[:n * k] = True  # one reset for the batch: each group's options pick its task
        group_options = [dict(spec.options) for spec in specs] + [None] * (self.batch_size - n)
        options = {"group_options": group_options, "reset_mask": mask}
        prompts, infos = self.env.reset(seed=seeds, options=options)
        members = list(range(n * k))
        episode_of = {m: (specs[m // k].index, m % k) for m in members}
        said: dict[tuple[int, int], str] = {}  # (member, step) -> response, with record=True
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
                                             [episode_of[m] for m in active], self.vec, self.fmt, step))
            actions = [""] * self.vec.num_envs
            for m, response in zip(active, responses, strict=True):
                actions[m] = response
                said[(m, steps[m])] = response
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
        if self.record:
            self._transcript.extend(self._steps(members, episode_of, said))
        info_keys = () if self.protocol is None else self.protocol.info_keys
        out = []
        for m in members:
            spec = specs[m // k]
            kept = {key: _jsonable(last[m][key]) if isinstance(last[m][key], np.generic) else last[m][key]
                    for key in info_keys if key in last[m]}
            out.append(EpisodeResult(spec.index, m % k, spec.seed, str(last[m].get("task_id", "")),
                                     bool(last[m].get("won", False)), totals[m], steps[m], invalid[m],
                                     {**kept, **spec.meta}))
        return out

    def _steps(self, members: Sequence[int], episode_of: dict[int, tuple[int, int]],
               said: dict[tuple[int, int], str]) -> list[dict[str, Any]]:
        """The recorded steps of a finished batch, one dict per step (see the module docstring)."""
        member_of = {self.env.recorder.member_traj[m]: m for m in members}
        b = self.env.pop_batch()
        rows = []
        for i in range(len(b)):
            m, t = member_of[int(b.traj[i])], int(b.t[i])
            episode, sample = episode_of[m]
            rows.append({"episode": episode, "sample": sample, "t": t, "observation": b.state[i],
                         "response": said[(m, t)], "action": b.action[i], "reward": float(b.reward[i]),
                         "valid": bool(b.valid[i]), "penalty": float(b.row_penalty[i]),
                         "success": bool(b.success[i])})
        return rows


def check_split(protocol: EvalProtocol, split: str | None) -> str:
    """The evaluation split ``split`` names in ``protocol`` (``None``: its first).

    Raises:
        UnknownSplitError: ``split`` is not one of the protocol's splits (the message lists them, with the
            closest), or the protocol has none (its tasks come from reset seeds) and a split was given.
    """
    if split is None:
        return protocol.splits[0]
    if split in protocol.splits:
        return split
    if protocol.splits == ("",):
        raise UnknownSplitError(f"{protocol.env_id} has no splits: its tasks are drawn from reset seeds "
                                f"(seed, episodes); drop the split {split!r}")
    fix = close_match(split, protocol.splits) or "; pass one of them"
    raise UnknownSplitError(f"{protocol.env_id} is evaluated on the split {' or '.join(protocol.splits)}, "
                            f"not {split!r}{fix}")


def evaluate(policy: Any, env_id: str, split: str | None = None, *, episodes: int | None = None,
             samples: int = 1, batch_size: int = 16, seed: int = 0, max_steps: int | None = None,
             temperature: float = 0.0, max_new_tokens: int = 128, device: str = "cpu", progress: bool = True,
             precision: str = "float32", workers: int | None = None, **env_kwargs: Any) -> EvalResult:
    """Evaluate ``policy`` on ``env_id``'s evaluation split with the papers' metrics (one-shot :class:`Evaluator`).

    Args:
        policy: ``"random"``, ``"oracle"``, a model folder / name / training run folder, ``"module:function"``,
            a callable ``prompts -> responses`` or an :class:`~agentgym_credit.evaluation.policies.EvalPolicy`.
        env_id, split, episodes, samples, batch_size, seed, max_steps, progress, workers, env_kwargs: see
            :class:`Evaluator`.
        temperature: sampling temperature of model policies (0 = greedy).
        max_new_tokens: response budget of model policies.
        device: where a model policy runs.
        precision: forward passes of a model policy loaded from a name or folder (``"float32"``,
            ``"bfloat16"``, ``"auto"``).
    """
    policy = check_policy(policy)  # a mistyped policy fails here, before the environment is built
    with Evaluator(env_id, split, episodes=episodes, samples=samples, batch_size=batch_size, seed=seed,
                   max_steps=max_steps, progress=progress, workers=workers, **env_kwargs) as evaluator:
        return evaluator.run(policy, temperature=temperature, max_new_tokens=max_new_tokens, device=device,
                             precision=precision)


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def held_out(policy: Any, env_id: str, episodes: int, *, seed: int = 10**9, max_new_tokens: int = 48,
             temperature: float = 0.0, template: str | None = None, history_length: int | None = None,
             batch: int = 16, transcripts: list[dict[str, Any]] | None = None, transcript_episodes: int = 0,
             **env_kwargs: Any) -> dict[str, float]:
    """Success and valid-format rates of a trained policy on ``episodes`` held-out tasks (one member per task).

    The environment is the trainer's (its arguments ``env_kwargs``, the template's prompt), the tasks come from
    seeds starting at 10⁹, far from the trainer's (``seed · 1000003 + iteration · groups``), and the policy
    samples as in training (the trainer's stop strings; a batch of tasks seeded from its first task's seed).
    ``temperature=0`` evaluates the greedy policy.

    ``transcripts``, when given, receives one dict per step of the first ``transcript_episodes`` episodes
    (all of them when 0): ``episode`` (its index among the ``episodes``), ``t``, ``observation`` (what the
    policy was prompted with, before the template), ``response`` (the sampled text), ``action`` (what the
    environment executed), ``reward``, ``valid``, ``penalty`` and the episode's ``success``.

    Args:
        policy: a loaded :class:`~agentgym_credit.baselines.policy.Policy` (or what
            :class:`~agentgym_credit.evaluation.policies.GeneratorPolicy` loads).
        env_id: the environment.
        episodes: tasks to evaluate.
        seed: episode ``e`` is reset with seed ``seed + e``.
        max_new_tokens: response budget per step.
        temperature: sampling temperature (0 = greedy).
        template, history_length: the prompt (default: the environment family's template and its history).
        batch: tasks played at once.
        transcripts, transcript_episodes: see above.
        **env_kwargs: environment arguments (``max_steps`` …).

    Returns:
        ``success_rate``, ``valid_rate`` (share of steps with a valid response and action) and ``mean_steps``.
    """
    from agentgym_credit.baselines.generation import DEFAULT_STOP
    from agentgym_credit.evaluation.policies import GeneratorPolicy

    sampler = GeneratorPolicy(policy, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed,
                              stop=DEFAULT_STOP, batch_seeded=True)
    with Evaluator(env_id, episodes=episodes, batch_size=batch, seed=seed, progress=False, tasks="seeded",
                   template=template, history_length=history_length, record=transcripts is not None,
                   **env_kwargs) as evaluator:
        result = evaluator.run(sampler)
    steps = float(sum(r.steps for r in result.episodes))
    valid = steps - float(sum(r.invalid_steps for r in result.episodes))
    if transcripts is not None:
        keep = transcript_episodes or episodes
        transcripts.extend({k: v for k, v in row.items() if k != "sample"} for row in result.transcript
                           if row["episode"] < keep)
    return {"success_rate": sum(r.won for r in result.episodes) / episodes, "valid_rate": valid / max(steps, 1.0),
            "mean_steps": steps / episodes}
