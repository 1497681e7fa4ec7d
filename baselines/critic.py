"""The critic of ``step_gae``: a value head at the step boundary ("StepPO: Step-Aligned Policy Optimization for Agentic Reinforcement Learning" §4.2).

StepPO estimates the value of a step state before its action is generated, at the final state token:
:math:`V_\\phi(s^{(t)}_{M_t})`. :class:`StepCritic` is a small MLP on the policy LM's last-layer hidden
state at the last prompt token of each step (the policy is not updated by the value loss: the hidden
states are inputs). It is trained by MSE to the step-GAE returns of the estimator,

.. math:: \\mathcal L_V = \\frac1S \\sum_t \\big(V_\\phi(s_t) - (\\hat A^{Step}_t + V_{old}(s_t))\\big)^2,

and fills the batch's ``value`` column for ``step_gae`` (and, in the LLM trainer, for ``spa`` unless
``mode="group"``). A fresh
critic predicts 0, so the first iteration's step GAE is the Monte-Carlo return.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentgym_credit.records import StepBatch

from .heads import ScalarHead

__all__ = ["StepCritic"]


class StepCritic:
    """Value head :math:`V_\\phi` on boundary hidden states.

    Args:
        hidden_size: the policy's hidden size H.
        width: MLP width (0 = linear head).
        lr: Adam learning rate.
        steps: full-batch Adam steps per :meth:`fit`.
        device: where the head lives.
    """

    def __init__(self, hidden_size: int, width: int = 256, lr: float = 1e-3, steps: int = 5,
                 device: str | torch.device = "cpu") -> None:
        self.head = ScalarHead(hidden_size, width, lr).to(device)
        self.steps = int(steps)

    def values(self, boundary_hidden: torch.Tensor) -> np.ndarray:
        """:math:`V_\\phi(s_t)` per step (float64)."""
        return self.head.predict(boundary_hidden)

    def fill(self, batch: StepBatch, boundary_hidden: torch.Tensor) -> StepBatch:
        """The batch with its ``value`` column set from the critic."""
        return batch.with_columns(value=self.values(boundary_hidden))

    def fit(self, boundary_hidden: torch.Tensor, returns: np.ndarray) -> float:
        """Regress :math:`V_\\phi` on the estimator's returns (MSE); returns the final loss."""
        target = torch.as_tensor(np.asarray(returns), dtype=torch.float32, device=next(self.head.parameters()).device)
        return self.head.fit(boundary_hidden, lambda v: torch.mean((v - target) ** 2), self.steps)

    def state_dict(self) -> dict[str, Any]:
        return {"head": self.head.state_dict(), "optimizer": self.head.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.head.load_state_dict(state["head"])
        self.head.optimizer.load_state_dict(state["optimizer"])
