"""PPO-clip policy-gradient trainer for LLM agents on group environments, with any credit estimator.

One iteration (the loop of :func:`train`):

1. **rollout** — G groups × N members play one episode each (:func:`~agentgym_credit.baselines.rollout.collect_rollout`);
   with ``filter_groups`` (DAPO's dynamic sampling) groups whose members all won or all lost are dropped and
   fresh tasks played until G groups with mixed outcomes are kept or ``filter_max_rollouts`` rollouts were played;
   with ``rollout="tree"`` each group grows trees within ``step_budget`` agent steps instead
   (:func:`~agentgym_credit.baselines.rollout.collect_tree_rollout`): a shared prefix step is one row, so the
   update below trains it once;
2. **credit** — the critic fills ``value`` and the progress estimator ``progress`` when the estimator reads
   them (as the registry finds: ``step_gae``, ``spa`` unless ``mode=group``; ``spa``), then
   ``assign_credit(batch, estimator, **estimator_params)`` gives one advantage per step (``empg`` and
   ``entropy_modulation`` read the step's ``entropy``, the sampler's mean token entropy, recorded in the rollout);
3. **update** — ``ppo_epochs`` passes over the steps in micro-batches, the step advantage broadcast to the
   step's response tokens unchanged, PPO-clip with token- or step-level (geometric-mean) ratios and a k3
   KL penalty to the frozen initial policy (:func:`~agentgym_credit.baselines.losses.policy_loss`; its log-probs
   come from its own forward pass, except before the first optimizer step, while the policy computes exactly what
   the reference does (its copy, or a LoRA adapter still at zero) and the sampler's log-probs are the reference's),
   averaged per token, per step or per trajectory (``loss_agg``; the trajectory weights are computed over
   the rows of each optimizer step), gradients accumulated over ``grad_accum`` micro-batches per optimizer
   step (none when every advantage is zero and there is no KL term: Adam's momentum alone would move the
   weights); the critic and the progress estimator are refitted. Identical step records (group members start
   alike and often answer alike) are forwarded once, each row keeping its own loss term
   (:mod:`~agentgym_credit.baselines.batching`).

Metrics (with each phase's time: generate, env, log-probs, credit, update) go to ``<out_dir>/metrics.jsonl``
and ``metrics.csv`` every iteration; with ``log_rollouts`` every step row of every rollout (observation,
response, executed action, reward, advantage) goes to ``<out_dir>/rollouts.jsonl`` (as verl's
``rollout_data_dir`` dumps generations). At the end (and every ``save_every``-th iteration) the policy is
exported with ``save_pretrained`` to ``<out_dir>/policy`` (LoRA merged), a Hugging Face folder that
``agc train --model <out_dir>/policy`` loads; the resumable state goes to the optional
``<out_dir>/trainer_state.pt`` (:mod:`~agentgym_credit.baselines.run_files`).

Every argument is checked before any work (:meth:`~agentgym_credit.baselines.config.TrainConfig.validate`),
and an existing output folder is refused unless ``--resume`` or ``--overwrite`` is given. The command line,
``agc train``, is :mod:`~agentgym_credit.baselines.train_cli`::

    agc train --env Sokoban-Group-v0 --estimator gigpo --model tiny --iters 2 --out-dir runs/gigpo
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from agentgym_credit.credit import Credit, assign_credit
from agentgym_credit.deprecation import moved
from agentgym_credit.records import StepBatch

from .batching import duplicate_rows, length_batches, right_align, row_lengths
from .config import TrainConfig
from .critic import StepCritic
from .generation import VLLM_ENTROPY_TOP_K, HFGenerator, VLLMGenerator
from .losses import broadcast_to_tokens, policy_loss, step_weights
from .policy import (
    StepForward,
    attach_lora,
    export_policy,
    load_policy,
    response_logprobs,
    step_hidden_states,
)
from .progress import EmbeddingProgressEstimator, ProgressHead
from .rollout import (
    Rollout,
    collect_rollout,
    collect_tree_rollout,
    dynamic_sampling,
    make_group_env,
    mixed_outcome_groups,
    transcript,
)
from .run_files import (
    STATE_FILE,
    check_out_dir,
    load_state,
    read_metrics,
    save_state,
    write_jsonl,
    write_metrics,
)
from .runtime import free_cores, packed_linears, resolve_device, seed_everything

__all__ = ["Trainer", "train"]

_MOVED = {
    **{name: f"agentgym_credit.baselines.config.{name}" for name in ("PENALTY_CREDITS", "check_estimator")},
    **{name: f"agentgym_credit.baselines.runtime.{name}" for name in ("check_device", "vllm_cpu_build")},
    "check_env_id": "agentgym_credit.envs.spec.check_env_id",
    "synthetic_batch": "agentgym_credit.credit.registry.probe_batch",
    "build_parser": "agentgym_credit.baselines.train_cli.build_parser",
    "main": "agentgym_credit.baselines.train_cli.main",
}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)


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
            top_k = VLLM_ENTROPY_TOP_K if "entropy" in config.columns_read() else 0  # the step entropy EMPG reads
            self.generator: Any = VLLMGenerator(self.policy, str(folder), config.max_new_tokens, config.temperature,
                                                entropy_top_k=top_k)
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
        self.columns = config.columns_read()  # which of value / progress the estimator reads, from the registry
        self.critic = StepCritic(hidden_size, lr=config.critic_lr, steps=config.critic_steps,
                                 device=self.device) if self.needs_value else None
        self.progress: ProgressHead | None = None
        if "progress" in self.columns:
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
        """Whether the estimator reads the critic's ``value`` column with its parameters, as the registry finds
        (:func:`~agentgym_credit.credit.registry.columns_read`): ``step_gae``, and ``spa`` unless
        ``mode="group"`` is asked for (SPA-RL trains with PPO and GAE)."""
        return "value" in self.columns

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
        """One rollout of every group from reset seed ``seed`` (chains, or trees with ``rollout="tree"``)."""
        out = self._collect(seed, lambda k, active: self._progress("rollout", k, None))
        if not self.config.fixed_tasks:
            self.tasks_drawn += self.config.groups
        return out

    def _collect(self, seed: int, on_step: Any) -> Rollout:
        """The rollout of the configured kind: chains, or trees grown within the step budget (each step one row,
        so a shared prefix is trained once)."""
        with packed_linears(self.policy.model):  # the sampling calls of a rollout pack the weights once
            if self.config.rollout == "tree":
                return collect_tree_rollout(self.env, self.generator, self.config.tree_config(), seed=seed,
                                            on_step=on_step)
            return collect_rollout(self.env, self.generator, seed=seed, on_step=on_step)

    def filtered_rollout(self) -> Rollout:
        """DAPO's dynamic sampling: rollouts of fresh tasks until ``groups`` groups with mixed outcomes are kept
        (the first ones, in play order) or ``filter_max_rollouts`` rollouts were played."""
        cfg = self.config
        return dynamic_sampling(lambda: self._play(cfg.seed * 1_000_003 + self.tasks_drawn), cfg.groups,
                                cfg.filter_max_rollouts)

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

    def reference_logprobs(
        self, rollout: Rollout, behaviour: Sequence[Any] | None = None
    ) -> list[torch.Tensor] | None:
        """Per row, the reference policy's log-probs of the response tokens (None without KL).

        While the policy is the reference (:meth:`policy_is_reference`: before the first optimizer step of a run),
        ``behaviour`` — the log-probs the rollout was sampled with, from the same weights, precision and
        temperature — are the reference's and no second forward pass is run.
        """
        if not self.config.kl_coef:
            return None
        if behaviour is not None and self.policy_is_reference():
            return [torch.as_tensor(np.asarray(b), dtype=torch.float32) for b in behaviour]
        if self.reference is not None:
            return self._rows_logprobs(rollout, self.reference, contextlib.nullcontext())
        return self._rows_logprobs(rollout, self.policy.model, self.policy.model.disable_adapter())

    @torch.no_grad()
    def policy_is_reference(self) -> bool:
        """Whether the policy computes what the KL penalty's reference computes, bit for bit: with full fine-tuning
        its weights equal the reference copy's; with LoRA (the reference is the base, the adapter off) every
        ``lora_B`` is zero, so the adapter adds exact zeros (peft starts it so; the first update moves it)."""
        model = self.policy.model
        if self.reference is not None:
            mine, theirs = dict(model.named_parameters()), dict(self.reference.named_parameters())
            return mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
        if not self.config.lora:
            return False
        lora_b = [p for name, p in model.named_parameters() if "lora_B" in name]
        return bool(lora_b) and not any(bool(p.any()) for p in lora_b)

    @torch.inference_mode()
    def _rows_logprobs(self, rollout: Rollout, model: Any, ctx: Any) -> list[torch.Tensor]:
        """Per row, ``model``'s log-probs of the response tokens (one forward per distinct sequence, in ``ctx``)."""
        out: list[torch.Tensor] = [torch.zeros(0)] * len(rollout)
        same = duplicate_rows(rollout)
        unique = np.flatnonzero(same == np.arange(len(rollout)))
        with ctx, self.policy.autocast(), packed_linears(model):  # no gradient: weights packed once per call
            for part in length_batches(row_lengths(rollout)[unique], 2 * self.config.micro_batch_size):
                rows = unique[part]
                resp = [rollout.response_ids[r] for r in rows]
                fwd = response_logprobs(model, [rollout.prompt_ids[r] for r in rows], resp,
                                        pad_id=self.policy.pad_id, temperature=self.temperature)
                for b, (r, ids) in enumerate(zip(rows, resp, strict=True)):
                    out[r] = fwd.logprobs[b, fwd.mask.shape[1] - len(ids):].cpu()
        return [out[r] for r in same]

    def old_logprobs(self, rollout: Rollout) -> list[np.ndarray | torch.Tensor]:
        """Per row, ``log π_old`` of the response tokens for the PPO ratio.

        The Hugging Face sampler's log-probs are the trainer's own (same model, same precision, same forward).
        vLLM's come from other kernels (in bf16 they differ by 0.04 nats per token on average on SmolLM2,
        the documentation's *GPU* page, "vLLM on the CPU"), which would put a ratio ≠ 1 on fresh samples:
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
        behaviour = self.old_logprobs(rollout)
        ref = self.reference_logprobs(rollout, behaviour)
        logprob_s = time.perf_counter() - start
        model.train()
        sums: dict[str, float] = {}
        count, steps = 0, 0
        total = cfg.ppo_epochs * -(-len(rollout) // cfg.micro_batch_size)
        same = duplicate_rows(rollout)
        how = None if cfg.loss_agg == "auto" else cfg.loss_agg
        for _ in range(cfg.ppo_epochs):
            if cfg.shuffle:  # rows of similar length share a micro-batch (less padding); batches in random order
                micro = length_batches(row_lengths(rollout), cfg.micro_batch_size, self.rng, same)
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
                    weights[step_rows] = step_weights(rollout.batch, step_rows)
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

        Phases (seconds): ``generate_s`` (sampling; of it ``prefill_s``, the prompts' forward, and
        ``decode_steps`` counts the decoding steps, where the sampler reports them), ``env_s`` (the rest of the
        rollout: environments, prompts, recording), ``credit_s`` (critic / progress features and fits, the
        estimator), ``logprob_s``
        (reference log-probs; with vLLM also the recomputed ``log π_old``), ``update_s``
        (forward/backward/optimizer), ``iteration_s`` (all); ``iteration_cpu_s`` is the process's CPU seconds over
        the iteration and ``threads`` torch's thread count (what ``num_threads=0`` resolved to): on a shared machine
        wall-clock seconds include waiting for a core.
        """
        start, cpu_start = time.perf_counter(), time.process_time()
        generated = dict(getattr(self.generator, "stats", {}))
        rollout = self.rollout(iteration)
        spent = {key: value - generated.get(key, 0.0) for key, value in getattr(self.generator, "stats", {}).items()}
        generate_s, tokens = spent.get("generate_s", 0.0), spent.get("generated_tokens", 0.0)
        sampler = {key: spent[key] for key in ("prefill_s", "decode_steps") if key in spent}
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
            "generate_tokens_per_s": tokens / generate_s if generate_s > 0 else 0.0, **sampler,
            "credit_s": t1 - t0, "estimator_s": credit_stats.get("estimator_s", 0.0),
            "logprob_s": logprob_s, "update_s": t2 - t1 - logprob_s, "iteration_s": t2 - start,
            "iteration_cpu_s": time.process_time() - cpu_start, "threads": torch.get_num_threads(),
        }

    def last_transcript(self) -> list[dict[str, Any]]:
        """The step rows of the last iteration's rollout (:func:`~agentgym_credit.baselines.rollout.transcript`)
        with ``iter``, the ``advantage`` the update used and, where the batch had them, the critic's
        ``value``, the progress estimator's ``progress`` and the sampler's ``entropy`` of each step."""
        if self.last_credit is None:
            return []
        advantages, batch = self.last_credit.advantages, self.last_batch
        extra = {name: column for name in ("value", "progress", "entropy")
                 if (column := getattr(batch, name)) is not None}
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
        """Save what the policy folder lacks to resume: optimizer, critic, progress, RNG, LoRA adapter
        (:func:`~agentgym_credit.baselines.run_files.save_state`)."""
        return save_state(self, path)

    def load_checkpoint(self, path: str | Path) -> None:
        """Resume from a run folder (``policy/`` + ``trainer_state.pt``) or its ``trainer_state.pt``
        (:func:`~agentgym_credit.baselines.run_files.load_state`)."""
        load_state(self, path)


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


def train(config: TrainConfig,
          on_iteration: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Train a policy with ``config``; returns the per-iteration metrics (also written to ``out_dir``).

    Args:
        config: the run's settings.
        on_iteration: called with each iteration's metrics once they are written (``agc train`` prints a line).

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
    history = read_metrics(previous / "metrics.jsonl", trainer.iteration) if config.resume else []
    rollout_log = out_dir / "rollouts.jsonl"
    if config.log_rollouts:  # a resumed run keeps the rows of the iterations it keeps
        kept = read_metrics(previous / "rollouts.jsonl", trainer.iteration) if config.resume else []
        write_jsonl(rollout_log, kept, "w")
    inner = _IterationBar(config.progress_bar)
    trainer.progress_callback = inner
    bar = tqdm(range(trainer.iteration, config.iters), desc=f"train {config.estimator}",
               disable=not config.progress_bar, dynamic_ncols=True)
    try:
        for it in bar:
            metrics = trainer.iterate(it)
            inner.close()
            history.append(metrics)
            write_metrics(out_dir, history)
            if on_iteration is not None:
                on_iteration(metrics)
            if config.log_rollouts:
                write_jsonl(rollout_log, trainer.last_transcript(), "a")
            bar.set_postfix(success=f"{metrics['success_rate']:.2f}", loss=f"{metrics.get('loss', 0.0):.3f}",
                            s=f"{metrics['iteration_s']:.1f}")
            if config.save_every and (it + 1) % config.save_every == 0 and it + 1 < config.iters:
                trainer.save(out_dir, state=config.save_state)
        trainer.save(out_dir, state=config.save_state)
    finally:
        inner.close()
        trainer.env.close()
    return history
