"""ALFWorld's credit probe: the planner's ground truth for the credit-quality benchmark (``agc run --env alfworld``).

The groups are ALFWorld games (the shipped train games, or those of ``--task-types``) played by an ε-noisy
planner oracle (:func:`epsilon_oracle`): the planner's next command from the current state
(:meth:`~agentgym_credit.envs.alfworld.env.ALFWorldEnv.expert_next_action`), a random admissible command with
probability ε. The ground truth of a step is ``+1`` when the executed command is the planner's next command from
that state and ``−1`` otherwise (the planner returns one optimal plan, so an equally short alternative counts as
−1); the oracle gives it with its response.

The oracle's entropy is that of its action distribution at the state,
:math:`\\pi(a \\mid s) = (1 - \\varepsilon)\\, q(a \\mid s) + \\varepsilon / |A(s)|` with :math:`q` the planner's
command and :math:`A(s)` the admissible commands, so a state with more of them is less certain (a state where the
planner has no plan: uniform, :math:`\\log |A(s)|`).

Needs the ``alfworld`` extra to roll out; importing this module does not load the engine.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import numpy as np

from agentgym_credit.cli_args import positive_int
from agentgym_credit.envs.credit_probe import CreditProbe, ProbePolicy, ProbeStep, noisy_entropy

__all__ = ["PROBE", "epsilon_oracle"]


def epsilon_oracle(env: Any, epsilon: float, seed: int) -> ProbePolicy:
    """The ε-noisy planner (the planner's next command, a random admissible command with probability ε) as a
    rollout policy; each response carries its ground truth, +1 for the planner's command, −1 otherwise.

    Args:
        env: the ``ALFWorld-Group-v0`` vector env (its ``unwrapped.members``).
        epsilon: the probability of a random admissible command.
        seed: seeds the policy's generator (one for all members).
    """
    members = env.unwrapped.members
    rng = np.random.default_rng(seed)

    def policy(obs: list[Any], ids: list[int], infos: list[dict[str, Any]]) -> list[ProbeStep]:
        out = []
        for i, info in zip(ids, infos, strict=True):
            expert = members[i].unwrapped.expert_next_action()
            admissible = list(info.get("admissible_actions", [])) or [expert or "look"]
            explore = expert is None or rng.random() < epsilon
            action = admissible[rng.integers(len(admissible))] if explore else expert
            h = noisy_entropy(epsilon, [expert] if expert else admissible, admissible)
            out.append(ProbeStep(action, h, 1.0 if action == expert else -1.0))
        return out

    return policy


def _add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--max-steps", type=positive_int, default=30, help="episode length for ALFWorld.")
    group.add_argument("--task-types", nargs="+", default=None,
                       help="ALFWorld task types to draw games from (default all; the planner's search is short "
                            "for pick_and_place_simple and look_at_obj_in_light, seconds per state for the others).")


def _env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``max_steps`` and ``task_types`` (ids 1-6 become names, for the environment and the table's title)."""
    from agentgym_credit.envs.alfworld.data import normalize_task_types  # needs the alfworld extra

    try:
        task_types = list(normalize_task_types(args.task_types) or []) or None
    except ValueError as exc:
        raise ValueError(f"--task-types: {exc}") from None
    return {"max_steps": args.max_steps, "task_types": task_types}


def _setting(env_kwargs: Mapping[str, Any]) -> str:
    task_types = env_kwargs.get("task_types")
    return "shipped train games" + (f": {', '.join(task_types)}" if task_types else "")


PROBE = CreditProbe(
    policy=epsilon_oracle,
    truth="+1 for the planner's next command, -1 for any other",
    setting=_setting,
    add_arguments=_add_arguments,
    env_kwargs=_env_kwargs,
)
"""ALFWorld's credit probe (``EnvFamilySpec.credit_probe``); the ground truth is the one each response carries."""
