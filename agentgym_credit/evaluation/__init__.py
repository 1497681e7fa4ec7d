"""Evaluation of any policy on an environment's evaluation split with the papers' metrics.

>>> from agentgym_credit.evaluation import evaluate  # doctest: +SKIP
>>> result = evaluate("oracle", "Sokoban-Group-v0", episodes=32)  # doctest: +SKIP
>>> result.metrics["overall"]["All"]["success"]  # doctest: +SKIP

* :mod:`~agentgym_credit.evaluation.protocols` — episodes and metrics per environment (from the environment
  family specs);
* :mod:`~agentgym_credit.evaluation.policies` — random, oracle, model, callable policies;
* :mod:`~agentgym_credit.evaluation.runner` — :func:`evaluate`, the reusable :class:`Evaluator` and :func:`held_out`
  (a trained policy on held-out tasks of its training environment);
* :mod:`~agentgym_credit.evaluation.cli` — ``agc eval``;
* :mod:`~agentgym_credit.evaluation.credit_quality` — ``agc run``: every estimator's step credit against the
  ground truth of the Sokoban solver (or the ALFWorld planner).
"""

from typing import Any

from agentgym_credit.deprecation import moved
from agentgym_credit.evaluation.policies import (
    RANDOM_CODE_ACTIONS,
    CallablePolicy,
    EvalPolicy,
    GeneratorPolicy,
    OraclePolicy,
    PolicyStep,
    RandomPolicy,
    check_policy,
    random_action,
    resolve_policy,
)
from agentgym_credit.evaluation.protocols import (
    PROTOCOLS,
    EpisodeResult,
    EpisodeSpec,
    EvalProtocol,
    EvaluationUnavailable,
    get_protocol,
)
from agentgym_credit.evaluation.runner import EvalResult, Evaluator, evaluate, held_out

__all__ = [
    "PROTOCOLS",
    "RANDOM_CODE_ACTIONS",
    "CallablePolicy",
    "EpisodeResult",
    "EpisodeSpec",
    "EvalPolicy",
    "EvalProtocol",
    "EvalResult",
    "EvaluationUnavailable",
    "Evaluator",
    "GeneratorPolicy",
    "OraclePolicy",
    "PolicyStep",
    "RandomPolicy",
    "check_policy",
    "evaluate",
    "get_protocol",
    "held_out",
    "random_action",
    "resolve_policy",
]


def __getattr__(name: str) -> Any:
    return moved(__name__, name, {"ALFWORLD_TASK_COLUMNS": "agentgym_credit.envs.alfworld.spec.TASK_COLUMNS"})
