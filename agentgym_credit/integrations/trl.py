"""TRL: train with ``GRPOTrainer`` on the library's group envs with per-step advantages.

TRL's ``GRPOTrainer`` samples ``num_generations`` completions per dataset prompt and normalizes their
rewards within each prompt group ("DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open
Language Models", arXiv:2402.03300). Multi-turn agents need something else: one training sample per
agent *step*, and an advantage per step from a credit estimator (e.g. GiGPO's
:math:`A = A^E(\\tau) + \\omega A^S(a \\mid s)`, "Group-in-Group Policy Optimization for LLM Agent
Training", arXiv:2505.10978).

:class:`StepCreditGRPOTrainer` keeps TRL's optimizer, loss (clipped ratio, KL, loss types), logging and
checkpointing, and replaces only the generation-and-scoring stage: each generation batch plays one
rollout of G task groups × N members on a group env with the trainer's model, records the steps, runs
the estimator, and hands TRL one sample per step (its prompt, its response, its advantage). TRL's own
reward functions and group normalization are not used. Each step's ``entropy`` (EMPG, "Harnessing
Uncertainty: Entropy-Modulated Policy Gradients for Long-Horizon LLM Agents", arXiv:2509.09265) is the mean
token entropy of the sampling distribution :math:`\\operatorname{softmax}(z / T)` over the step's response, at
TRL's ``temperature``, taken from the same log-softmax the response is sampled from
(:mod:`agentgym_credit.baselines.entropy`), so ``estimator="empg"`` and ``entropy_modulation`` run as they do
in the bundled trainer.

The training dataset only supplies reset seeds (:func:`seed_dataset`): one rollout per generation batch,
reset with the ``seed`` of the batch's first row.

Tree rollouts (``tree=TreeSchedule(...)``, :mod:`agentgym_credit.baselines.tree_rollout`: Tree-GRPO's fixed
schedule or ARPO's entropy-triggered one, within a budget of agent steps per group) give a tree batch whose
shared prefix steps are single rows, so TRL gets each step as one sample and trains it once (with an estimator
that accepts trees, e.g. ``tree_grpo``).

Example:
    >>> from agentgym_credit.baselines.policy import load_policy
    >>> from agentgym_credit.integrations.trl import StepCreditGRPOTrainer, seed_dataset, step_credit_config
    >>> policy = load_policy("tiny")
    >>> trainer = StepCreditGRPOTrainer(
    ...     model=policy.model, processing_class=policy.tokenizer,
    ...     args=step_credit_config(output_dir="out", max_steps=2, max_completion_length=8),
    ...     train_dataset=seed_dataset(2), env_id="Sokoban-Group-v0", groups=2, group_size=2,
    ...     estimator="gigpo", env_kwargs={"max_steps": 3})  # doctest: +SKIP
    >>> trainer.train()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentgym_credit.baselines.generation import HFGenerator
from agentgym_credit.baselines.policy import Policy
from agentgym_credit.baselines.rollout import Rollout, collect_rollout, collect_tree_rollout, make_group_env
from agentgym_credit.baselines.tree_rollout import TreeSchedule
from agentgym_credit.credit.registry import Credit, assign_credit, check_estimator

try:  # TRL is an optional dependency (the ``trl`` extra)
    from trl import GRPOConfig, GRPOTrainer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "agentgym_credit.integrations.trl needs TRL: pip install 'agentgym-credit[trl]'"
    ) from exc

__all__ = ["StepCreditGRPOTrainer", "env_step_reward", "seed_dataset", "step_credit_config", "rollout_to_samples"]


def seed_dataset(num_rollouts: int, start_seed: int = 0) -> Any:
    """A ``datasets.Dataset`` of reset seeds: row k has ``seed = start_seed + k``.

    ``prompt`` is a placeholder column (TRL's dataloader expects one); the env supplies the prompts.
    """
    import datasets

    seeds = list(range(start_seed, start_seed + int(num_rollouts)))
    return datasets.Dataset.from_dict({"prompt": [f"rollout {s}" for s in seeds], "seed": seeds})


def step_credit_config(**overrides: Any) -> GRPOConfig:
    """A ``GRPOConfig`` fit for :class:`StepCreditGRPOTrainer` (CPU defaults; any field may be overridden).

    TRL's sampler repeats each dataset row ``num_generations`` times (at least 2) and a generation batch
    holds ``per_device_train_batch_size × steps_per_generation`` of them; the rollout takes its seed from the
    first, so ``per_device_train_batch_size = num_generations = 2`` by default. The rollout's steps consumed in ``steps_per_generation = gradient_accumulation_steps`` micro-batches,
    one optimizer update per rollout (``num_iterations = 1``), no KL (``beta = 0``), token-mean loss
    (``loss_type = "bnpo"``), no reporting.
    """
    values: dict[str, Any] = dict(
        per_device_train_batch_size=2, num_generations=2, gradient_accumulation_steps=1, steps_per_generation=1,
        num_iterations=1, beta=0.0, loss_type="bnpo", learning_rate=1e-5, max_completion_length=64,
        report_to=[], logging_steps=1, save_strategy="no", use_cpu=not torch.cuda.is_available(),
        remove_unused_columns=False, temperature=1.0,
    )
    values.update(overrides)
    return GRPOConfig(**values)


def rollout_to_samples(
    rollout: Rollout, credit: Credit, *, pad_id: int, num_chunks: int = 1, device: Any = "cpu"
) -> dict[str, torch.Tensor]:
    """TRL's training-batch tensors from a rollout: one sample per recorded step.

    Prompts are left-padded (``prompt_ids``, ``prompt_mask``), responses right-padded
    (``completion_ids``, ``completion_mask``), ``advantages`` holds each step's advantage. Rows are
    added with an all-zero ``completion_mask`` and advantage 0 until the count divides ``num_chunks``
    (TRL splits a generation batch into equal micro-batches); they contribute no loss term.
    """
    n = len(rollout)
    rows = n + (-n) % max(1, num_chunks)
    p_width = max(len(p) for p in rollout.prompt_ids)
    c_width = max(len(c) for c in rollout.response_ids)
    prompt_ids = torch.full((rows, p_width), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((rows, p_width), dtype=torch.long)
    completion_ids = torch.full((rows, c_width), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((rows, c_width), dtype=torch.long)
    for i, (p, c) in enumerate(zip(rollout.prompt_ids, rollout.response_ids, strict=True)):
        prompt_ids[i, p_width - len(p):] = torch.as_tensor(p)
        prompt_mask[i, p_width - len(p):] = 1
        completion_ids[i, : len(c)] = torch.as_tensor(c)
        completion_mask[i, : len(c)] = 1
    for i in range(n, rows):  # padding rows: one pad token with a real attention entry, no loss
        prompt_mask[i, -1] = 1
    advantages = torch.zeros(rows, dtype=torch.float32)
    advantages[:n] = torch.as_tensor(credit.advantages, dtype=torch.float32)
    out = dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion_ids,
               completion_mask=completion_mask, advantages=advantages)
    return {k: v.to(device) for k, v in out.items()}


def env_step_reward(prompts: list[Any], completions: list[Any], step_reward: list[float], **_: Any) -> list[float]:
    """The reward of each sample: the env reward recorded for its step (TRL's reward-function signature).

    ``GRPOTrainer`` requires a reward source at construction. :class:`StepCreditGRPOTrainer` registers
    this one, so TRL's bookkeeping names the env reward (``rewards/env_step_reward/mean`` in the logs);
    the trainer reads the rewards from the recorded step batch and logs them under that name itself.
    """
    return [float(r) for r in step_reward]


class StepCreditGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose samples are group-env steps and whose advantages come from an estimator.

    Args:
        env_id: a registered group environment (``"Sokoban-Group-v0"`` …).
        groups: G, task groups per rollout.
        group_size: N, members per group (the credit estimators compare them).
        estimator: any name of :func:`agentgym_credit.credit.available_estimators` that needs no
            critic values or progress column (``grpo``, ``rloo``, ``gigpo``, ``salt``, ``graphgpo``, ``hgpo``,
            ``empg``).
        estimator_params: its parameters (papers' symbols; ``entropy_modulation={...}`` modulates the
            estimator's advantages by the step entropy, as EMPG).
        env_kwargs: forwarded to ``gym.make_vec`` (e.g. ``{"max_steps": 10}``).
        stop: strings that end a response (kept in it).
        tree: grow trees instead of chains (:class:`~agentgym_credit.baselines.tree_rollout.TreeSchedule`; the
            group's ``group_size`` members are the slots its trees are played on).
        **kwargs: ``GRPOTrainer``'s arguments (``model``, ``processing_class``, ``args``,
            ``train_dataset`` …); ``reward_funcs`` is not accepted (rewards come from the env).

    Raises:
        ValueError: a ``GRPOConfig`` this trainer cannot honour (``num_iterations`` ≠ 1, or
            ``steps_per_generation`` ≠ ``gradient_accumulation_steps``: old log-probabilities are the
            current model's, as in TRL's on-policy path), an estimator that reads a critic's values or
            a progress estimate (``step_gae``, ``spa``), or tree rollouts with an estimator that does not
            accept trees (or a bad ``tree`` schedule).
    """

    def __init__(
        self,
        *,
        env_id: str,
        groups: int,
        group_size: int,
        estimator: str = "gigpo",
        estimator_params: dict[str, Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        stop: tuple[str, ...] = ("</action>",),
        tree: TreeSchedule | None = None,
        **kwargs: Any,
    ) -> None:
        if "reward_funcs" in kwargs:
            raise ValueError("StepCreditGRPOTrainer takes its rewards from the environment; drop reward_funcs")
        self.estimator = estimator
        self.estimator_params = dict(estimator_params or {})
        # the step entropy (empg, entropy_modulation) comes with every sampled response; nothing else does
        needed = [c for c in check_estimator(estimator, **self.estimator_params) if c != "entropy"]
        if needed:
            raise ValueError(
                f"estimator {estimator!r} needs the column(s) {needed}, which this trainer does not produce "
                "(it records rewards and the step entropy, no critic values or progress); use the bundled "
                "trainer (agc train) for step_gae / spa"
            )
        if tree is not None:
            tree.check_rollout(estimator, group_size)
        self.tree = tree
        super().__init__(reward_funcs=[env_step_reward], **kwargs)
        if self.num_iterations != 1 or self.args.steps_per_generation != self.args.gradient_accumulation_steps:
            raise ValueError(
                "StepCreditGRPOTrainer is on-policy: set num_iterations=1 and steps_per_generation="
                "gradient_accumulation_steps (see step_credit_config)"
            )
        self.env = make_group_env(env_id, groups, group_size, **dict(env_kwargs or {}))
        self._stop = tuple(stop)
        self.last_rollout: Rollout | None = None
        self.last_credit: Credit | None = None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        mode = "train" if self.model.training else "eval"
        seed = int(inputs[0]["seed"]) if inputs and "seed" in inputs[0] else None
        model = self.accelerator.unwrap_model(self.model)
        tok = self.processing_class
        policy = Policy(model, tok, "trl", chat=bool(getattr(tok, "chat_template", None)))
        generator = HFGenerator(policy, max_new_tokens=self.max_completion_length,
                                temperature=self.temperature, stop=self._stop)
        if self.tree is not None:
            rollout = collect_tree_rollout(self.env, generator, self.tree, seed=seed)
        else:
            rollout = collect_rollout(self.env, generator, seed=seed)
        credit = assign_credit(rollout.batch, self.estimator, **self.estimator_params)
        self.last_rollout, self.last_credit = rollout, credit
        out: dict[str, Any] = rollout_to_samples(
            rollout, credit, pad_id=policy.pad_id, num_chunks=self.args.steps_per_generation,
            device=self.accelerator.device,
        )
        out["num_items_in_batch"] = out["completion_mask"].sum()
        metrics = self._metrics[mode]
        for key in ("success_rate", "mean_return", "valid_rate", "mean_steps"):
            metrics[f"env/{key}"].append(float(rollout.stats[key]))
        rewards = env_step_reward([], [], rollout.batch.reward.tolist())
        metrics["rewards/env_step_reward/mean"].append(float(np.mean(rewards)))
        metrics["env/steps_per_rollout"].append(float(len(rollout)))
        metrics["credit/advantage_abs_mean"].append(float(np.abs(credit.advantages).mean()))
        if rollout.batch.entropy is not None:
            metrics["env/step_entropy_mean"].append(float(rollout.batch.entropy.mean()))
        return out

    def close(self) -> None:
        """Close the group env."""
        self.env.close()
