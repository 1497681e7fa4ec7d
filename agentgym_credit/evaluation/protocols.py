"""Evaluation protocols: which episodes an environment is evaluated on and which metrics the papers report.

One :class:`~agentgym_credit.envs.eval_protocol.EvalProtocol` per environment fixes

* the evaluation split and its episodes: every task of the split exactly once, in the split's order, or,
  for an environment without splits, ``num_episodes`` tasks drawn from seeds ``seed, seed + 1, …``;
* the papers' episode length, the prompt template and the response format;
* the metrics, computed from each episode's last ``info`` only.

Each environment family defines its protocol in its folder (``agentgym_credit/envs/<name>/spec.py``, with
the papers the metrics come from) and registers it with its
:class:`~agentgym_credit.envs.spec.EnvFamilySpec`; :data:`PROTOCOLS` is the table of every registered
family's protocols. Rates are percentages in [0, 100]; every table row also carries ``n``, the number of
episodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from agentgym_credit.argtypes import close_match
from agentgym_credit.deprecation import moved
from agentgym_credit.envs.eval_protocol import EpisodeResult, EpisodeSpec, EvalProtocol
from agentgym_credit.envs.spec import FamilyTable

__all__ = [
    "EpisodeSpec",
    "EpisodeResult",
    "EvalProtocol",
    "EvaluationUnavailable",
    "PROTOCOLS",
    "get_protocol",
]

PROTOCOLS: Mapping[str, EvalProtocol] = FamilyTable(lambda spec: tuple((p.env_id, p) for p in spec.protocols))
"""The protocol of each registered environment id."""

_MOVED = {
    "ALFWORLD_TASK_COLUMNS": "agentgym_credit.envs.alfworld.spec.TASK_COLUMNS",
    "SOKOBAN_DEFAULT_EPISODES": "agentgym_credit.envs.sokoban.spec.DEFAULT_EPISODES",
}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)


class EvaluationUnavailable(RuntimeError):
    """An environment cannot be evaluated here (not registered, or its extra is not installed)."""


def get_protocol(env_id: str) -> EvalProtocol:
    """The protocol of ``env_id``.

    Raises:
        EvaluationUnavailable: the environment has no protocol, or it is not registered here.
    """
    import agentgym_credit  # noqa: F401  (registers the environments)

    if env_id not in PROTOCOLS:
        raise EvaluationUnavailable(
            f"no evaluation protocol for {env_id!r}; known environments: {', '.join(sorted(PROTOCOLS))}"
            + close_match(env_id, PROTOCOLS))
    if env_id not in gym.registry:
        raise EvaluationUnavailable(
            f"{env_id} is not registered in this installation, so it cannot be evaluated "
            f"(registered: {', '.join(sorted(k for k in gym.registry if k in PROTOCOLS))})")
    return PROTOCOLS[env_id]
