"""Credit probes: what the credit-quality benchmark needs to know about an environment family.

The benchmark (``agc run``, :mod:`agentgym_credit.evaluation.credit_quality`) rolls out groups with an ε-noisy
oracle and scores every estimator's per-step advantage against the ground-truth quality of each step. A family
that can give that ground truth declares a :class:`CreditProbe` on its spec
(:attr:`~agentgym_credit.envs.spec.EnvFamilySpec.credit_probe`): the group id to roll out, the info keys to
record, the ε-noisy oracle as a rollout policy, how a step's ground truth is computed, the line that describes
it under the table, the table's title, and the ``agc run`` options that set the environment's arguments. The
benchmark reads the probes and knows no environment by name.

The oracles answer each member with a :class:`ProbeStep` (the action, the entropy of the oracle's action
distribution, and the step's ground truth where the oracle knows it), the response the tree rollouts record
(:func:`~agentgym_credit.baselines.tree_rollout.grow_trees` reads its ``text`` and ``entropy``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym_credit.records import StepBatch

__all__ = ["CreditProbe", "ProbePolicy", "ProbeStep", "noisy_entropy", "response_truth"]


@dataclass
class ProbeStep:
    """A noisy oracle's response: the action, the entropy of the oracle's action distribution in that state
    (what the entropy tree schedule branches on) and, where the oracle knows it, the step's ground truth."""

    text: str
    entropy: float
    gt: float = float("nan")


ProbePolicy = Callable[[list[Any], list[int], list[dict[str, Any]]], list[ProbeStep]]
"""``(observations, members, infos) -> responses``: one :class:`ProbeStep` per member that plays (the policy
:func:`~agentgym_credit.baselines.tree_rollout.grow_trees` calls)."""


def noisy_entropy(epsilon: float, greedy: Sequence[str], actions: Sequence[str]) -> float:
    """Entropy (nats, ``scipy.stats.entropy``) of the ε-noisy choice: with probability 1 − ε uniform over
    ``greedy``, with probability ε uniform over ``actions``.

    :math:`H = -\\sum_a \\pi(a) \\log \\pi(a)` with
    :math:`\\pi(a) = (1 - \\varepsilon)\\, q(a) + \\varepsilon / |A|`, :math:`q` uniform over ``greedy`` and
    :math:`A` the ``actions`` (a greedy action outside them keeps its mass).
    """
    from scipy.stats import entropy

    probs = dict.fromkeys(actions, epsilon / len(actions))
    for a in greedy:
        probs[a] = probs.get(a, 0.0) + (1.0 - epsilon) / len(greedy)
    return float(entropy(list(probs.values())))


def response_truth(batch: StepBatch, extras: Mapping[str, np.ndarray], responses: Sequence[ProbeStep]) -> np.ndarray:
    """The ground truth the oracle gave with each row's response (its :attr:`ProbeStep.gt`)."""
    return np.array([r.gt for r in responses], dtype=float)


def _no_options(args: argparse.Namespace) -> dict[str, Any]:
    return {}


def _plain(env_kwargs: Mapping[str, Any]) -> str:
    return ""


@dataclass(frozen=True)
class CreditProbe:
    """How the credit-quality benchmark rolls out one family and scores its steps (see the module docstring).

    Attributes:
        policy: ``(vector env, epsilon, seed) -> policy``: the ε-noisy oracle over the vector env's members as
            a rollout policy (:data:`ProbePolicy`), its randomness seeded by ``seed``.
        truth: the ground truth in one line, for the table's legend and ``--env``'s help.
        setting: ``env_kwargs -> str``: the environment's setting; the table's title is
            ``<env id> (<setting>)``.
        ground_truth: ``(batch, extras, responses) -> gt``: each row's ground-truth step quality (NaN: left
            out of the scores) from the recorded batch, the recorder's extras of :attr:`info_keys`
            (``<key>_before`` and ``<key>`` per row) and the policy's response that played the row (default
            :func:`response_truth`: the ``gt`` the oracle gave).
        info_keys: info keys recorded with every step (for :attr:`ground_truth`).
        env_id: the group environment rolled out (``gym.make_vec(env_id, …)``); None: the family's first id.
        add_arguments: adds the family's options to an argument group of ``agc run``'s parser (flags must
            not clash with another family's), or None.
        env_kwargs: ``parsed arguments -> env kwargs`` of ``gym.make_vec``; raises ``ValueError`` with a
            message naming the option for a bad value, ``ImportError`` when the family's extra is missing.
        variant: ``env_kwargs -> name``: appended to the results' file name where the environment's arguments
            differ from the family's default setting (``""``: they do not).
    """

    policy: Callable[[Any, float, int], ProbePolicy]
    truth: str
    setting: Callable[[Mapping[str, Any]], str]
    ground_truth: Callable[[StepBatch, Mapping[str, np.ndarray], Sequence[ProbeStep]], np.ndarray] = response_truth
    info_keys: tuple[str, ...] = ()
    env_id: str | None = None
    add_arguments: Callable[[argparse._ArgumentGroup], None] | None = None
    env_kwargs: Callable[[argparse.Namespace], dict[str, Any]] = _no_options
    variant: Callable[[Mapping[str, Any]], str] = _plain

    def __post_init__(self) -> None:
        if not self.truth or "\n" in self.truth:
            raise ValueError(f"credit probe: truth must be one non-empty line, got {self.truth!r}")
        if isinstance(self.info_keys, str):
            raise ValueError(f"credit probe: info_keys must be a tuple of keys, not the string {self.info_keys!r}")
