"""Exceptions raised by agentgym-credit.

Every error names what is wrong and what to do about it. All inherit from :class:`AgentGymCreditError`
and from the closest built-in exception, so ``except ValueError`` keeps working for callers that
predate them.
"""

from __future__ import annotations

import gymnasium.error

__all__ = [
    "AgentGymCreditError",
    "BatchValidationError",
    "CheckpointError",
    "CreditOverflowError",
    "DataNotFoundError",
    "EnvClosedError",
    "MissingColumnError",
    "ResetError",
    "ResetNeeded",
    "TreeBatchError",
    "UnknownEstimatorError",
    "UnknownMatcherError",
    "UnknownModelError",
    "UnknownSplitError",
    "WorkerStartError",
]


class AgentGymCreditError(Exception):
    """Base class of every exception raised by this library."""


class BatchValidationError(AgentGymCreditError, ValueError):
    """A :class:`~agentgym_credit.records.StepBatch` column is malformed.

    The message names the column and, where there is one, the first offending row.
    """


class MissingColumnError(AgentGymCreditError, ValueError):
    """An estimator needs an optional column (``value``, ``progress``) the batch does not carry."""


class TreeBatchError(AgentGymCreditError, ValueError):
    """An estimator that works on chains of steps was given a tree batch (a ``parent`` column with
    branches); the message names the estimators that accept trees."""


class UnknownEstimatorError(AgentGymCreditError, KeyError):
    """No estimator is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class UnknownMatcherError(AgentGymCreditError, ValueError):
    """A matcher specification string cannot be parsed or names no known matcher."""


class UnknownModelError(AgentGymCreditError, ValueError):
    """A model or policy names nothing loadable here: not a folder with a model, not a model in the local
    Hugging Face cache, not a built-in name, not an importable ``module:function``.

    The message says what the name is not and, where one is close, the name that was probably meant.
    """


class UnknownSplitError(AgentGymCreditError, ValueError):
    """An environment has no split (or evaluation split) of that name; the message lists the splits."""


class DataNotFoundError(AgentGymCreditError, FileNotFoundError):
    """Data an environment needs is not where it was looked for (games, a catalog, a corpus, task files, set by
    an argument or an environment variable); the message says where it looked and how to get the data."""


class CheckpointError(AgentGymCreditError, ValueError):
    """A file given to resume from is not a state this library wrote: it holds objects other than tensors,
    numbers, strings, lists and dicts, and unpickling them could run code, so it is not loaded."""


class CreditOverflowError(AgentGymCreditError, FloatingPointError):
    """An estimator produced a non-finite value from finite inputs (values too large to represent)."""


class ResetNeeded(AgentGymCreditError, gymnasium.error.ResetNeeded, RuntimeError):
    """An environment was stepped without a live episode to step.

    A subclass of Gymnasium's own ``ResetNeeded`` (which ``gym.make``'s order check raises), so one
    ``except`` catches both.

    Raised by ``step()`` before the first successful ``reset()`` and after a ``reset()`` that raised
    (the failed reset leaves no episode: neither the old one nor a half-built new one is continued).
    Call ``reset()`` and step again.
    """


class ResetError(AgentGymCreditError, RuntimeError):
    """``reset()`` of a group vector env failed for some members.

    Every member was tried; the message names each failing member with its error. The failing members
    are left needing reset (``step()`` treats them as finished); the worker processes stay alive.

    Attributes:
        errors: member index -> ``"ExceptionType: message"``.
    """

    def __init__(self, message: str, errors: dict[int, str] | None = None) -> None:
        super().__init__(message)
        self.errors = dict(errors or {})


class EnvClosedError(AgentGymCreditError, RuntimeError):
    """The environment was closed; build a new one instead of resetting or stepping it."""


class WorkerStartError(AgentGymCreditError, RuntimeError):
    """A worker process of a group vector env could not start or build its members.

    The message carries the worker's traceback when it sent one. Under the ``spawn`` start method the
    script that builds the env must guard its entry point with ``if __name__ == "__main__":``.
    """
