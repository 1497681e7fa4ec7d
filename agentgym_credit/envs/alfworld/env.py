"""``ALFWorld-Group-v0``: one ALFWorld trajectory on the real ALFWorld engine (TextWorld PDDL).

Observations, admissible commands, ``won``, the task type and the instruction are ALFWorld's own (the
engine is :class:`~agentgym_credit.envs.alfworld.engine.AlfredEngine`, transcript-identical to
upstream ``AlfredTWEnv``). On top of ALFWorld:

* ``reset(seed=s)`` draws the game from ``self.np_random``: the same seed gives the same game and the
  same initial state (``options={"game_index": i}`` picks game ``i`` of :attr:`ALFWorldEnv.games`);
* a command that is not one of the current admissible commands (after stripping surrounding white
  space, as the engine does) is an invalid step: the engine's ``"Nothing happens."`` observation,
  ``action_valid=False``, state unchanged, never an exception;
* ``reward`` is ``10 * won`` and the episode terminates when the game is won;
* ``info["anchor"]`` is the observation plus the agent's location and held objects (GraphGPO's
  deterministic state), read from the engine's facts::

      <observation>
      Location: <receptacles at the agent's location | the middle of the room>
      Holding: <held objects | nothing>

* ``info`` also carries ``task_type``, ``gamefile`` and ``walkthrough`` (the commands stored in the
  game: the hand-coded expert's winning run, in real and generated games);
* :meth:`ALFWorldEnv.expert_next_action` is a planning oracle;
* forking (``snapshot()`` / ``restore()``, :mod:`agentgym_credit.envs.fork`) replays: TextWorld's PDDL
  state is tied to the engine's planner library and its text generation to the engine's wrappers, so a
  restore resets the member to the snapshot's game and steps the recorded commands again (the engine is
  deterministic; the replay is checked to reach the snapshot's observation). The oracle's adopted plan
  travels in the snapshot.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from agentgym_credit.envs.alfworld.data import GameRecord, find_games, normalize_task_types, record_for
from agentgym_credit.envs.alfworld.engine import AlfredEngine
from agentgym_credit.envs.alfworld.plans import PlanCache
from agentgym_credit.envs.base import INVALID_ACTION_OBSERVATION, GroupMemberEnv, StepOutcome, integer_option

__all__ = ["ALFWorldEnv", "WIN_REWARD", "format_anchor"]

#: The reward of winning a game (the papers' 10 x success).
WIN_REWARD = 10.0
_TASK_MARKER = "Your task is to: "


def format_anchor(observation: str, location: Sequence[str], holding: Sequence[str]) -> str:
    """The anchor state text: the observation, the agent's location and what it holds."""
    where = ", ".join(location) if location else "the middle of the room"
    held = ", ".join(holding) if holding else "nothing"
    return f"{observation}\nLocation: {where}\nHolding: {held}"


class ALFWorldEnv(GroupMemberEnv):
    """One ALFWorld trajectory (a member of a group).

    Args:
        split: ``"train"``, ``"valid_seen"`` or ``"valid_unseen"``.
        data_path: where to read games (see :mod:`agentgym_credit.envs.alfworld.data`); by default
            ``$ALFWORLD_DATA/json_2.1.1`` if ``ALFWORLD_DATA`` is set (an error if it holds no games),
            else the games shipped with the package.
        task_types: keep only these task types (names or upstream ids 1-6).
        max_steps: episode length after which ``truncated`` is set.
        game_files: play exactly these games (``game.tw-pddl`` files or trial folders) instead of
            looking them up; ``split`` and ``data_path`` are then ignored.
        render_mode: ``"ansi"`` or ``None``.
        plan_cache: where :meth:`expert_next_action`'s plans are kept (default: the machine's
            :data:`~agentgym_credit.envs.alfworld.plans.SHARED_PLAN_CACHE`, with the shipped plans).

    Example:
        >>> import gymnasium as gym, agentgym_credit  # doctest: +SKIP
        >>> env = gym.make("ALFWorld-Group-v0", split="valid_unseen")  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
        >>> obs, reward, terminated, truncated, info = env.step(info["admissible_actions"][0])  # doctest: +SKIP
    """

    fork_method = "replay"

    def __init__(
        self,
        split: str = "train",
        data_path: str | os.PathLike[str] | None = None,
        task_types: Sequence[str | int] | None = None,
        max_steps: int = 50,
        game_files: Sequence[str | os.PathLike[str]] | None = None,
        render_mode: str | None = None,
        plan_cache: PlanCache | None = None,
    ) -> None:
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        if game_files is not None:
            wanted = normalize_task_types(task_types)
            records = sorted(record_for(path) for path in game_files)
            records = [r for r in records if wanted is None or r.task_type in wanted]
            if not records:
                raise ValueError("game_files holds no game of the requested task types")
        else:
            records = find_games(split, data_path, task_types)
        self.split = split
        self.games: tuple[GameRecord, ...] = tuple(records)
        self._engine = AlfredEngine(plan_cache=plan_cache)
        self._record: GameRecord | None = None
        self._task = ""
        self._valid_history: list[str] = []
        self._plan: list[str] = []
        self._plan_start = 0

    # ------------------------------------------------------------------ hooks
    def _reset_task(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        index = integer_option(options, "game_index", len(self.games))
        if index is None:
            index = self.rng_choice(self.np_random, len(self.games))
        self._record = self.games[index]
        if self._engine.game_file != str(self._record.game_file):
            self._engine.load(self._record.game_file)
        state = self._engine.reset()
        observation = state["feedback"]
        self._task = observation.split(_TASK_MARKER, 1)[1].strip() if _TASK_MARKER in observation else ""
        self._valid_history = []
        self._plan = []  # planned on the first expert_next_action() call
        self._plan_start = 0
        info = self._game_info(state["admissible_commands"])
        info["anchor"] = self._anchor(observation)
        return observation, info

    def _step_action(self, action: str) -> StepOutcome:
        admissible = self._last_info["admissible_actions"]
        command = action.strip()
        if command not in admissible:
            observation = INVALID_ACTION_OBSERVATION
            return StepOutcome(
                observation=observation,
                reward=0.0,
                won=False,
                terminated=False,
                action_valid=False,
                anchor=self._anchor(observation),
                info=self._game_info(admissible),
            )
        state, _, _ = self._engine.step(command)
        self._valid_history.append(command)
        observation = state["feedback"]
        won = bool(state["won"])
        return StepOutcome(
            observation=observation,
            reward=WIN_REWARD if won else 0.0,
            won=won,
            terminated=won,
            action_valid=True,
            anchor=self._anchor(observation),
            info=self._game_info(state["admissible_commands"]),
        )

    # ------------------------------------------------------------------- fork
    @cached_property
    def _games_digest(self) -> str:
        ids = "\n".join(r.game_id for r in self.games).encode("utf-8")
        return hashlib.blake2b(ids, digest_size=16).hexdigest()

    def _fork_settings(self) -> dict[str, Any]:
        return {**super()._fork_settings(), "games": self._games_digest}

    def _snapshot_state(self) -> dict[str, Any]:
        # what the replay does not rebuild: the oracle's adopted plan
        return {"plan": tuple(self._plan), "plan_start": self._plan_start}

    def _restore_state(self, state: Any) -> None:
        fields = state if isinstance(state, dict) else {}
        plan, start = fields.get("plan"), fields.get("plan_start")
        if not (
            isinstance(plan, tuple) and all(isinstance(c, str) for c in plan)
            and isinstance(start, int) and 0 <= start <= len(self._valid_history)
        ):
            raise ValueError(
                "the snapshot is corrupt (its ALFWorld oracle plan is malformed); take a new snapshot() of the "
                "member to fork"
            )
        self._plan, self._plan_start = list(plan), start

    # ----------------------------------------------------------------- public
    @property
    def game(self) -> GameRecord:
        """The game of the current episode."""
        if self._record is None:
            raise RuntimeError("call reset() first")
        return self._record

    @property
    def walkthrough(self) -> list[str]:
        """The commands stored in the current game (its ``walkthrough``: the hand-coded expert's winning run)."""
        return self._engine.walkthrough

    def expert_next_action(self) -> str | None:
        """The planner's next command from the current state; ``None`` once the episode is over.

        The oracle follows the planner's plan, made on the first call of an episode (the stored
        walkthrough is the hand-coded expert's run, which wanders and can exceed the step limit). While
        every valid command played since the plan was adopted follows it, the answer is the plan's next
        command (no planning). After a deviation (or once the plan is exhausted without a win) it re-plans
        from the current state with TextWorld's planner (Fast Downward on the game's PDDL problem:
        under 0.3 s of CPU in small rooms, seconds for multi-step tasks in large kitchens), adopts the
        new plan and returns its first command (``None`` if no plan exists). Invalid commands change
        nothing, so they are not deviations. Plans are cached on disk per game and state
        (:class:`~agentgym_credit.envs.alfworld.plans.PlanCache`), so each is searched once per machine.
        """
        if self._record is None or self._finished:
            return None
        done = len(self._valid_history) - self._plan_start
        on_path = self._valid_history[self._plan_start :] == self._plan[:done]
        if not (on_path and done < len(self._plan)):
            self._plan = self._engine.plan()
            self._plan_start = len(self._valid_history)
            done = 0
        return self._plan[done] if done < len(self._plan) else None

    def close(self) -> None:
        self._engine.close()
        super().close()

    # ---------------------------------------------------------------- helpers
    def _anchor(self, observation: str) -> str:
        return format_anchor(observation, self._engine.agent_location(), self._engine.inventory())

    def _game_info(self, admissible: Sequence[str]) -> dict[str, Any]:
        record = self.game
        return {
            "admissible_actions": list(admissible),
            "task": self._task,
            "task_id": record.game_id,
            "task_type": record.task_type,
            "gamefile": str(record.game_file),
            "walkthrough": self.walkthrough,
        }
