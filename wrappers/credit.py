"""Credit: per-step advantages attached as soon as every member of a group has finished.

:class:`AttachCredit` records the rollout like :class:`~agentgym_credit.wrappers.RecordStepBatch` and,
on the step where the last member of a group finishes, runs any registered estimator on that group's
trajectories (estimators treat groups independently, so this equals running it on the whole batch).
That step's info carries, for each member of the group, ``info["advantages"]`` (its trajectory's
per-step advantages, in step order) and ``info["credit_group"]``.

Estimators that need more than the record get it from callables over the finished group's
:class:`~agentgym_credit.records.StepBatch`: ``value_fn(batch)`` returns one critic value per row
(``step_gae``; ``spa`` uses it when given, as SPA-RL's PPO + GAE does, and without it falls back to the
critic-free ``mode="group"``, which favours a trajectory's early steps) and ``progress_fn(batch)`` one progress
contribution per row (``spa``). ``empg`` (and any estimator with ``entropy_modulation``) reads the policy's
per-step entropy, which the caller passes with the actions: ``env.step(actions, entropy=values)`` (see
:class:`~agentgym_credit.wrappers.RecordStepBatch`); a step without it is refused before the env moves. EMPG's
statistics span the batch it is given, here the groups that finish on one step. The estimator name and
parameters are checked when the wrapper is built, by running the estimator once on a tiny synthetic batch, so
a typo fails before any rollout.

Crashed trajectories (``crashed`` column) get advantage 0 and enter no group statistic (see
:func:`~agentgym_credit.credit.assign_credit`; ``keep_crashed=True`` keeps them).

Memory: the wrapper holds one rollout. ``credit_batch()`` returns the batch and advantages of the
groups credited since the last ``reset()``; ``pop_credit()`` returns the same and releases them at
once. Every ``reset()`` releases whatever the previous rollout left, so take the batch before resetting.
The advantages are kept by the recorder with their trajectories, so whatever forgets the rows
(``pop_credit()``, ``pop_batch()``, a reset) forgets the advantages too.

Example:
    >>> env = AttachCredit(gym.make_vec("Sokoban-Group-v0", num_envs=8, group_size=4,
    ...                                 vectorization_mode="vector_entry_point"), "gigpo")  # doctest: +SKIP
    >>> for it in range(iterations):  # doctest: +SKIP
    ...     obs, info = env.reset(seed=it)
    ...     while not env.unwrapped.finished.all():
    ...         obs, *_ = env.step(policy(obs))
    ...     batch, advantages = env.pop_credit()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv

from agentgym_credit.credit.registry import assign_credit, check_estimator
from agentgym_credit.records import StepBatch
from agentgym_credit.wrappers.recording import RecordStepBatch

__all__ = ["AttachCredit"]

ColumnFn = Callable[[StepBatch], Any]


class AttachCredit(RecordStepBatch):
    """Record the rollout and attach per-step advantages group by group.

    Args:
        env: a group vector env.
        estimator: a registered estimator name (``"gigpo"``, ``"graphgpo"`` …).
        include_penalty: ``False``, ``"row"`` (the invalid-action penalty charged to its row, as
            verl-agent does) or ``"return"`` (or ``True``: subtracted from the reward); see
            :mod:`agentgym_credit.wrappers.recording`.
        info_keys: info keys kept per step (see :class:`RecordStepBatch`).
        value_fn: ``value_fn(batch) -> array`` of one critic value per row of a finished group's batch;
            required by estimators that need a ``value`` column (``step_gae``).
        progress_fn: ``progress_fn(batch) -> array`` of one progress contribution per row; required by
            estimators that need a ``progress`` column (``spa``).
        keep_crashed: give crashed trajectories ordinary credit instead of leaving them out.
        **params: estimator parameters.

    Raises:
        UnknownEstimatorError: no estimator of that name.
        TypeError, ValueError: a parameter the estimator does not accept or refuses.
        ValueError: the estimator needs ``value_fn`` / ``progress_fn`` and it was not given.
    """

    def __init__(self, env: VectorEnv, estimator: str = "gigpo", include_penalty: bool | str = False,
                 info_keys: tuple[str, ...] = (), *, value_fn: ColumnFn | None = None,
                 progress_fn: ColumnFn | None = None, keep_crashed: bool = False, **params: Any) -> None:
        needed = check_estimator(estimator, **params)
        fns = {"value": value_fn, "progress": progress_fn}
        for column, fn in fns.items():
            if fn is not None and not callable(fn):
                raise TypeError(f"{column}_fn must be a callable batch -> array, got {type(fn).__name__}")
            if column in needed and fn is None:
                raise ValueError(
                    f"estimator {estimator!r} needs a {column!r} column: pass {column}_fn=f where f(batch) "
                    f"returns one {column} per row of a finished group's StepBatch"
                )
        super().__init__(env, include_penalty=include_penalty, info_keys=info_keys)
        gym.utils.RecordConstructorArgs.__init__(
            self, estimator=estimator, include_penalty=include_penalty, info_keys=info_keys,
            value_fn=value_fn, progress_fn=progress_fn, keep_crashed=keep_crashed, **params,
        )
        self.estimator, self.params = estimator, params
        self.keep_crashed = keep_crashed
        self.needs_entropy = "entropy" in needed
        self._column_fns = {column: fn for column, fn in fns.items() if fn is not None}
        # traj id -> per-step advantages, held by the recorder with the trajectory and forgotten with it
        # (pop_batch, pop_credit, reset), so they never outlive its rows
        self._advantages: dict[int, np.ndarray] = self.recorder.attachments
        self._credited: set[int] = set()

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Reset (see :class:`RecordStepBatch`) and release the previous rollout's batch and advantages."""
        out = super().reset(seed=seed, options=options)
        self._release()
        return out

    def _release(self) -> None:
        """Forget every credited group and every group no member belongs to any more (abandoned)."""
        live = set(self.recorder.member_group.values()) & self.recorder.open_groups()
        self.recorder.discard(self._credited | (self.recorder.closed_groups() - live))
        self._credited &= live

    def _with_columns(self, batch: StepBatch) -> StepBatch:
        columns = {}
        for column, fn in self._column_fns.items():
            values = np.asarray(fn(batch), dtype=np.float64)
            if values.shape != (len(batch),):
                raise ValueError(
                    f"{column}_fn returned shape {values.shape} for a batch of {len(batch)} rows; "
                    f"it must return one {column} per row"
                )
            columns[column] = values
        return batch.with_columns(**columns) if columns else batch

    def step(self, actions: Any, *, entropy: Any = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step and record (see :meth:`RecordStepBatch.step`); attach credit to the groups that finished.

        Raises:
            ValueError: the estimator needs the policy's entropy (``empg``) and ``entropy`` is not given.
        """
        if self.needs_entropy and entropy is None:
            raise ValueError(
                f"estimator {self.estimator!r} needs the policy's entropy of every step: call "
                "env.step(actions, entropy=values) with each member's mean token entropy over its response"
            )
        obs, rewards, terminated, truncated, infos = super().step(actions, entropy=entropy)
        finished = self._credit_finished()
        if finished:
            adv = np.empty(self.num_envs, dtype=object)
            grp = np.full(self.num_envs, -1, dtype=np.int64)
            mask = np.zeros(self.num_envs, dtype=bool)
            traj_of_member = self.recorder.member_traj
            for i, g in self.recorder.member_group.items():
                if g in finished and traj_of_member.get(i) in self._advantages:
                    adv[i] = self._advantages[traj_of_member[i]]
                    grp[i] = g
                    mask[i] = True
            infos["advantages"], infos["_advantages"] = adv, mask
            infos["credit_group"], infos["_credit_group"] = grp, mask
        return obs, rewards, terminated, truncated, infos

    def _credit_finished(self) -> set[int]:
        """Run the estimator on every group that has finished (no unfinished trajectory, not held) and was not
        credited yet; returns those groups."""
        still_open = self.recorder.open_groups()
        finished = {g for g in self.recorder.member_group.values() if g not in still_open and g not in self._credited}
        if finished:
            batch = self.recorder.batch(finished)
            if len(batch):
                credit = assign_credit(self._with_columns(batch), self.estimator,
                                       keep_crashed=self.keep_crashed, **self.params)
                order = batch.order
                for start, length in zip(batch.traj_starts, batch.traj_length, strict=True):
                    rows = order[start:start + length]
                    self._advantages[int(batch.traj[rows[0]])] = credit.advantages[rows]
            self._credited |= finished
        return finished

    def release(self, groups: set[int]) -> None:
        """Stop holding ``groups`` (a tree rollout is done growing them) and credit those that have finished;
        their advantages are in :meth:`credit_batch` (no step returns them in its info)."""
        super().release(groups)
        self._credit_finished()

    def credit_batch(self) -> tuple[StepBatch, np.ndarray]:
        """The batch of the groups credited since the last reset and its advantages (batch row order); a group
        whose last members a crash ended outside any step is credited here."""
        self._close_crashed()
        self._credit_finished()
        batch = self.recorder.batch(self._credited)
        adv = np.zeros(len(batch))
        order = batch.order
        for start, length in zip(batch.traj_starts, batch.traj_length, strict=True):
            rows = order[start:start + length]
            adv[rows] = self._advantages[int(batch.traj[rows[0]])]
        return batch, adv

    def pop_credit(self) -> tuple[StepBatch, np.ndarray]:
        """Like :meth:`credit_batch`, then release that batch and its advantages.

        Groups still running stay recorded and are credited (and returned by a later call) when they
        finish.
        """
        batch, adv = self.credit_batch()
        self.recorder.discard(self._credited)
        return batch, adv
