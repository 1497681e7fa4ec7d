"""Member environments used by the group-vector-env tests (a counter task and a crashing one)."""

from __future__ import annotations

import os
import time
from typing import Any

from agentgym_credit.envs.base import GroupMemberEnv, StepOutcome


class CounterEnv(GroupMemberEnv):
    """Reach the target number by 'inc'/'dec' from a seeded start.

    'crash' kills the process, 'raise' raises, 'unpicklable' returns an info value that cannot be
    pickled, 'sleep' waits 0.3 s and reports when (``info["slept"]``: wall-clock start and end);
    ``reset(options={"fail": True})`` raises, ``reset(options={"start": v})`` starts from ``v``.
    """

    def __init__(self, max_steps: int = 6) -> None:
        super().__init__(max_steps)
        self.value = 0
        self.target = 0

    def _reset_task(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if options.get("fail"):
            raise ValueError("reset asked to fail")
        self.value = int(self.np_random.integers(0, 5))
        self.target = int(self.np_random.integers(5, 8))
        if "start" in options:
            self.value = int(options["start"])
        return self._obs(), {"anchor": str(self.value), "admissible_actions": ["inc", "dec"],
                             "task": f"reach {self.target}", "task_id": f"t{self.target}"}

    def _obs(self) -> str:
        return f"value {self.value} target {self.target}"

    def _step_action(self, action: str) -> StepOutcome:
        if action == "crash":
            os._exit(3)
        if action == "raise":
            raise RuntimeError("member bug")
        if action == "sleep":
            began = time.time()
            time.sleep(0.3)
            return StepOutcome(self._obs(), 0.0, False, False, True, str(self.value),
                               {"slept": (began, time.time())})
        if action == "unpicklable":
            return StepOutcome(self._obs(), 0.0, False, False, True, str(self.value), {"callback": lambda: 0})
        valid = action in ("inc", "dec")
        if valid:
            self.value += 1 if action == "inc" else -1
        won = self.value == self.target
        return StepOutcome(self._obs(), 10.0 if won else 0.0, won, won, valid, str(self.value))


def value_plus(env: CounterEnv, k: int) -> int:
    """The member's value plus ``k`` (run where the member lives by ``GroupVectorEnv.apply``)."""
    if k < 0:
        raise ValueError("k must be >= 0")
    return env.value + k


class FragileCounterEnv(CounterEnv):
    """A :class:`CounterEnv` that cannot be built while the file ``block`` exists (a worker that dies then
    cannot be replaced until it is removed)."""

    def __init__(self, block: str, max_steps: int = 6) -> None:
        if os.path.exists(block):
            raise RuntimeError(f"members cannot be built while {block} exists")
        super().__init__(max_steps)
