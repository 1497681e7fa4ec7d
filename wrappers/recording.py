"""Recording: builds the :class:`~agentgym_credit.records.StepBatch` of a group rollout.

:class:`RecordStepBatch` wraps a group vector env and records one row per executed member step,
invalid steps included: the state key before the step (``info["anchor"]`` of the previous step or
reset), the executed action (``info["executed_action"]`` when an action-parsing wrapper is inside,
else the action given; an action that is not text as its short ``repr``, at most 200 characters), the
next state key, the env reward, ``valid`` (``info["action_valid"]``),
and, once the episode ends, ``done`` and ``success`` (``info["won"]``). Group ids are unique across
resets (``group = reset_index * num_groups + g``) and trajectory ids unique across the wrapper's life.

A trajectory cut short by a crash (``info["crashed"]``: its worker process died or the member raised)
is closed with ``crashed=True`` (the batch's ``crashed`` column), also where no step reports it: a member
whose worker died while another member was being reset, or while the worker answered a ``call``,
``apply``, ``snapshots`` or restore request (the group env's ``crashed`` mask; closed before the next step,
reset or batch is taken, so its group is credited and none of its rows is lost). A ``reset()`` that raises
:class:`~agentgym_credit.errors.ResetError` drops the unfinished trajectories of the members it left
without an episode.

The invalid-action penalty (``info["invalid_penalty"]`` of an action-parsing wrapper) is not recorded
by default. ``include_penalty="row"`` records it in the batch's ``penalty`` column, where the estimators
charge it to that row alone, as the verl-agent reference does (the row's episode score and step return
lose it; the trajectory's return and earlier steps do not). ``include_penalty="return"`` (or ``True``)
records ``reward − invalid_penalty`` as the step's reward instead, so the penalty enters the trajectory's
return :math:`R(\\tau)` and every earlier step's discounted return like any reward.

Forks (tree rollouts; :mod:`agentgym_credit.wrappers.forking` forks a member through the whole wrapper stack):
a member forked into others is described by its *cursor* (:meth:`TrajectoryRecorder.cursor`: its task group,
its depth — the steps its episode has taken — the state key it is in and the segment holding its last step).
Each member restored from a cursor opens a new trajectory, a *segment* of the tree batch
(:mod:`agentgym_credit.trees`), whose first row has ``t`` = the depth and ``parent`` = that segment (for a fork
at the initial state, ``t = 0`` and the segment that starts the tree, which the branch joins), so a shared prefix
is stored once. A tree rollout :meth:`~TrajectoryRecorder.hold` s its task groups while it may still grow them,
so that a group whose members have all finished is not taken as done before its last branch was played.

The policy's uncertainty at each step (the mean token entropy of the member's response, which EMPG reads
from the batch's ``entropy`` column) is recorded when the caller passes it with the actions,
``env.step(actions, entropy=values)`` (one value per member, finite and ≥ 0; entries of members whose
episode has ended are ignored), or when an inner wrapper reports it as ``info["entropy"]``. A trajectory
gets the column only if every one of its steps has a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv, VectorWrapper

from agentgym_credit.envs.base import as_text_action
from agentgym_credit.errors import ResetError
from agentgym_credit.records import Step, StepBatch, Trajectory

__all__ = ["PENALTY_MODES", "Cursor", "RecordStepBatch", "TrajectoryRecorder", "check_penalty_mode", "member_info"]

#: How the invalid-action penalty is recorded: not at all, charged to its row, or as part of the reward.
PENALTY_MODES = (False, "row", "return")


def check_penalty_mode(include_penalty: Any) -> bool | str:
    """The recording mode of ``include_penalty`` (``True`` means ``"return"``), or a clear ``ValueError``."""
    if include_penalty is True:
        return "return"
    if include_penalty is False or include_penalty is None:
        return False
    if isinstance(include_penalty, str) and include_penalty in PENALTY_MODES:
        return include_penalty
    raise ValueError(
        f"include_penalty must be False, 'row' (the penalty charged to its row) or True/'return' "
        f"(the penalty subtracted from the reward), got {include_penalty!r}"
    )


def member_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Member ``i``'s entries of a Gymnasium vector info dict (keys whose ``_key`` mask is set)."""
    out = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is None or mask[i]:
            out[key] = value[i] if isinstance(value, np.ndarray | list | tuple) else value
    return out


@dataclass
class _Open:
    group: int
    traj: int
    state: str
    steps: list[Step] = field(default_factory=list)
    crashed: bool = False
    #: depth of the segment's first step (0 for an episode recorded from its reset)
    t0: int = 0
    #: the segment this one continues (its step ``t0 − 1``, or for ``t0 = 0`` the segment starting the tree);
    #: None for a segment that starts a tree
    parent: int | None = None

    @property
    def depth(self) -> int:
        """The steps the episode has taken: the depth of the segment's next row."""
        return self.t0 + len(self.steps)

    def trajectory(self, success: bool, crashed: bool) -> Trajectory:
        fork = None if self.parent is None else (self.parent, self.t0 - 1)
        return Trajectory(self.group, self.steps, success, self.traj, crashed, parent=fork)


@dataclass(frozen=True)
class Cursor:
    """Where a member's recorded episode stands, to open its forks' segments from (see the module docstring).

    Attributes:
        group: the task group id.
        segment: the trajectory id of the segment holding the member's last step (for a member that has not
            stepped: the segment that starts its tree).
        depth: the steps the episode has taken (the depth of the next step).
        state: the state key the member is in (the ``state`` of its next row).
        before: the kept info values before the next step (``info_keys``).
    """

    group: int
    segment: int
    depth: int
    state: str
    before: tuple[tuple[str, Any], ...] = ()


class TrajectoryRecorder:
    """Accumulates steps per member and closes trajectories into a ``StepBatch``.

    Args:
        include_penalty: ``False``, ``"row"`` (the ``penalty`` column) or ``"return"`` (or ``True``:
            ``reward − invalid_penalty``); see the module docstring.
        info_keys: info keys to keep per step (after the step), returned by :meth:`extras`; the value
            at reset is kept as ``"<key>_before"`` of the first step.
    """

    def __init__(self, include_penalty: bool | str = False, info_keys: tuple[str, ...] = ()) -> None:
        self.include_penalty = check_penalty_mode(include_penalty)
        self.info_keys = tuple(info_keys)
        self._extras: dict[tuple[int, int], dict[str, Any]] = {}
        self._before: dict[int, dict[str, Any]] = {}
        self._open: dict[int, _Open] = {}
        self._closed: list[Trajectory] = []
        #: values kept with finished trajectories (trajectory id -> value), forgotten with them
        self.attachments: dict[int, Any] = {}
        self._next_traj = 0
        #: the trajectory id and the group most recently opened for each member
        self.member_traj: dict[int, int] = {}
        self.member_group: dict[int, int] = {}
        #: groups a tree rollout may still grow (counted as open)
        self._held: set[int] = set()

    def start(self, member: int, group: int, anchor: str, info: dict[str, Any] | None = None) -> None:
        """A member was reset: open its trajectory (an unfinished one is dropped)."""
        self._before[member] = {k: (info or {}).get(k) for k in self.info_keys}
        self._open[member] = _Open(group, self._next_traj, anchor)
        self.member_traj[member] = self._next_traj
        self.member_group[member] = group
        self._next_traj += 1

    def record(self, member: int, action: Any, reward: float, done: bool, info: dict[str, Any],
               entropy: float | None = None) -> None:
        """One executed step of ``member`` (``entropy``: the policy's mean token entropy over its response,
        else ``info["entropy"]`` when present)."""
        cur = self._open.get(member)
        if cur is None:
            return
        nxt = str(info.get("anchor", cur.state))
        penalty = float(info.get("invalid_penalty", 0.0)) if self.include_penalty else None
        if self.include_penalty == "return":
            reward, penalty = float(reward) - penalty, None
        executed = as_text_action(info.get("executed_action", action))  # a short text even where repr fails
        if entropy is None and info.get("entropy") is not None:
            entropy = float(info["entropy"])
        cur.steps.append(Step(cur.state, executed if isinstance(executed, str) else executed.text, nxt,
                              float(reward), bool(info.get("action_valid", True)), penalty=penalty,
                              entropy=None if entropy is None else float(entropy)))
        cur.state = nxt
        cur.crashed |= bool(info.get("crashed", False))
        if self.info_keys:
            after = {k: info.get(k) for k in self.info_keys}
            row = {f"{k}_before": v for k, v in self._before[member].items()}
            row.update(after)
            self._extras[(cur.traj, cur.depth - 1)] = row
            self._before[member] = after
        if done:
            self._closed.append(cur.trajectory(bool(info.get("won", False)), cur.crashed))
            del self._open[member]

    def abort(self, member: int) -> None:
        """``member``'s episode was lost to a crash without a step: close its trajectory as crashed.

        A trajectory with no recorded step is dropped (a batch has no empty trajectories).
        """
        cur = self._open.pop(member, None)
        if cur is not None and cur.steps:
            self._closed.append(cur.trajectory(False, crashed=True))

    def drop(self, member: int) -> None:
        """Forget ``member``'s unfinished trajectory (its episode ended without an outcome)."""
        self._open.pop(member, None)

    def forget(self, member: int) -> None:
        """``member`` takes no part in the rollout (a tree rollout's spare member before it is used): forget
        its unfinished trajectory and which group it last played."""
        self._open.pop(member, None)
        self.member_traj.pop(member, None)
        self.member_group.pop(member, None)

    def open_members(self) -> list[int]:
        return sorted(self._open)

    def open_groups(self) -> set[int]:
        """The groups with an unfinished trajectory, and the groups held open (:meth:`hold`)."""
        return {o.group for o in self._open.values()} | self._held

    def hold(self, groups: set[int]) -> None:
        """Count ``groups`` as open until :meth:`release`: a tree rollout may still grow them."""
        self._held |= set(groups)

    def release(self, groups: set[int]) -> None:
        """Stop holding ``groups`` open (:meth:`hold`)."""
        self._held -= set(groups)

    # ------------------------------------------------------------------ forks
    def cursor(self, member: int) -> Cursor:
        """Where ``member``'s recorded episode stands (:class:`Cursor`), to fork it.

        Raises:
            ValueError: ``member`` has no unfinished recorded episode.
        """
        cur = self._open.get(member)
        if cur is None:
            raise ValueError(f"member {member} has no unfinished recorded episode to fork; fork a member that is "
                             "playing (reset, not finished)")
        if cur.steps or cur.parent is None:
            segment = cur.traj
        else:  # a fork that has not stepped yet: its last step is its parent's
            segment = cur.parent
        before = tuple(self._before.get(member, {}).items())
        return Cursor(cur.group, segment, cur.depth, cur.state, before)

    def check_open_at(self, member: int) -> None:
        """Refuse to fork into ``member`` while it has an unfinished recorded episode with steps.

        Raises:
            ValueError: naming the member and the fix.
        """
        cur = self._open.get(member)
        if cur is not None and cur.steps:
            raise ValueError(
                f"member {member} is playing a recorded episode ({len(cur.steps)} step(s), trajectory {cur.traj}); "
                "fork into a member whose episode has finished, or drop its trajectory first (recorder.drop)"
            )

    def open_at(self, member: int, cursor: Cursor) -> int:
        """Open a segment for ``member``, restored to the state of ``cursor``: its first row will have
        ``t = cursor.depth`` and continue ``cursor.segment``. An unfinished trajectory of ``member`` without
        steps is replaced (:meth:`check_open_at` refuses one with steps).

        Returns:
            The new segment's trajectory id.
        """
        self.check_open_at(member)
        self._before[member] = dict(cursor.before) if self.info_keys else {}
        self._open[member] = _Open(cursor.group, self._next_traj, cursor.state, t0=cursor.depth,
                                   parent=cursor.segment)
        self.member_traj[member] = self._next_traj
        self.member_group[member] = cursor.group
        self._next_traj += 1
        return self._next_traj - 1

    def batch(self, groups: set[int] | None = None) -> StepBatch:
        """The finished trajectories (optionally of some groups only) as a batch.

        The ``entropy`` column is kept when every step of these trajectories has one, and left out
        otherwise (a rollout that passed entropies on some steps only has none to give EMPG).
        """
        trajs = [t for t in self._closed if groups is None or t.group in groups]
        trajs = [t for t in trajs if t.steps]
        if not trajs:
            return StepBatch.empty()
        kept = {t.traj for t in trajs}
        # a fork at the initial state of a tree whose first segment recorded no step (it crashed at once)
        # starts a tree of its own: the same initial state
        trajs = [replace(t, parent=None) if t.parent is not None and t.parent[1] < 0 and t.parent[0] not in kept
                 else t for t in trajs]
        if any(s.entropy is None for t in trajs for s in t.steps):
            trajs = [replace(t, steps=[replace(s, entropy=None) for s in t.steps]) for t in trajs]
        return StepBatch.from_trajectories(trajs)

    def extras(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """Per-row arrays of the kept info keys (``key`` after the step, ``key_before`` before it)."""
        names = [f"{k}_before" for k in self.info_keys] + list(self.info_keys)
        out = {name: np.empty(len(batch), dtype=object) for name in names}
        for row, (traj, t) in enumerate(zip(batch.traj, batch.t, strict=True)):
            values = self._extras.get((int(traj), int(t)), {})
            for name in names:
                out[name][row] = values.get(name)
        return out

    def clear(self) -> None:
        """Forget every finished trajectory (and its kept info values and attachments)."""
        self._closed.clear()
        self._extras.clear()
        self.attachments.clear()

    def discard(self, groups: set[int]) -> set[int]:
        """Forget the finished trajectories of ``groups`` (and their kept info values and attachments).

        Returns:
            The ids of the trajectories forgotten.
        """
        gone = {t.traj for t in self._closed if t.group in groups}
        if gone:
            self._closed = [t for t in self._closed if t.traj not in gone]
            self._extras = {k: v for k, v in self._extras.items() if k[0] not in gone}
            for traj in gone:
                self.attachments.pop(traj, None)
        return gone

    def closed_groups(self) -> set[int]:
        """The groups that have finished trajectories held by the recorder."""
        return {t.group for t in self._closed}


class RecordStepBatch(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Record every member step of a group vector env into a :class:`StepBatch`.

    Example:
        >>> env = RecordStepBatch(gym.make_vec("Sokoban-Group-v0", num_envs=8, group_size=4,
        ...                                    vectorization_mode="vector_entry_point"))  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
        >>> # step until every member finished
        >>> batch = env.pop_batch()  # doctest: +SKIP

    Args:
        env: a group vector env (``GroupVectorEnv`` or a wrapper of one).
        include_penalty: ``False``, ``"row"`` or ``"return"`` (or ``True``); see the module docstring.
        info_keys: info keys kept per step (see :meth:`TrajectoryRecorder.extras`).
    """

    def __init__(self, env: VectorEnv, include_penalty: bool | str = False, info_keys: tuple[str, ...] = ()) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, include_penalty=include_penalty, info_keys=info_keys)
        VectorWrapper.__init__(self, env)
        self.recorder = TrajectoryRecorder(include_penalty, tuple(info_keys))
        self._resets = 0
        self._group_size = int(getattr(env.unwrapped, "group_size", 1))
        self._num_groups = self.num_envs // self._group_size

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        mask = options.get("reset_mask") if isinstance(options, Mapping) else None
        try:
            obs, infos = self.env.reset(seed=seed, options=options)
        except ResetError:
            self._close_crashed()
            finished = np.asarray(self.env.unwrapped.finished)
            for i in self.recorder.open_members():
                if finished[i]:
                    self.recorder.drop(i)
            raise
        base = self._resets * self._num_groups
        self._resets += 1
        members = range(self.num_envs) if mask is None else np.flatnonzero(mask)
        for i in members:
            info = member_info(infos, int(i))
            self.recorder.start(int(i), base + int(i) // self._group_size, str(info.get("anchor", obs[i])), info)
        self._close_crashed()  # members whose worker died during this reset
        return obs, infos

    def _close_crashed(self) -> None:
        """Close as crashed the recorded trajectories of members whose episode a crash ended outside any step
        (the group env's ``crashed`` mask): no step will record their end."""
        crashed = getattr(self.env.unwrapped, "crashed", None)
        if crashed is None:
            return
        crashed = np.asarray(crashed)
        for i in self.recorder.open_members():
            if crashed[i]:
                self.recorder.abort(i)

    def step(self, actions: Any, *, entropy: Any = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step the env and record every member's step.

        Args:
            actions: one action per member.
            entropy: optional, one value per member: the policy's mean token entropy over the member's
                response (finite, ≥ 0 for every member still in an episode), recorded as the step's
                ``entropy`` (EMPG).

        Raises:
            ValueError: ``entropy`` has the wrong length, or a running member's value is negative or not
                finite (checked before the env is stepped).
        """
        self._close_crashed()
        open_before = set(self.recorder.open_members())
        values = self._check_entropy(entropy, open_before)
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        for i in open_before:
            info = member_info(infos, i)
            if info.get("active", True):
                self.recorder.record(i, actions[i], rewards[i], bool(terminated[i] or truncated[i]), info,
                                     None if values is None else float(values[i]))
        return obs, rewards, terminated, truncated, infos

    def _check_entropy(self, entropy: Any, members: set[int]) -> np.ndarray | None:
        if entropy is None:
            return None
        try:
            values = np.asarray(entropy, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"entropy must be one number per member ({self.num_envs}): {exc}") from exc
        if values.shape != (self.num_envs,):
            raise ValueError(f"entropy has {values.size} values for {self.num_envs} members; give one per member "
                             "(the mean token entropy of its response)")
        running = np.array(sorted(members), dtype=np.int64)
        bad = running[~(np.isfinite(values[running]) & (values[running] >= 0))] if running.size else running
        if bad.size:
            raise ValueError(f"entropy of member {int(bad[0])} is {values[bad[0]]!r}; an entropy is finite and ≥ 0")
        return values

    # ------------------------------------------------------------------ forks
    def fork_state(self, member: int) -> Cursor:
        """The recorder's part of a fork of ``member`` (:mod:`agentgym_credit.wrappers.forking`): its cursor."""
        return self.recorder.cursor(member)

    def check_fork(self, members: list[int]) -> None:
        """Refuse members that still play a recorded episode (before anything is forked)."""
        for i in members:
            self.recorder.check_open_at(i)

    def restore_fork_state(self, members: list[int], state: Cursor, obs: list[Any],
                           infos: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Open a segment for each forked member at ``state`` (observations and infos pass unchanged)."""
        for i in members:
            self.recorder.open_at(i, state)
        return obs, infos

    def hold(self, groups: set[int]) -> None:
        """Count ``groups`` as unfinished until :meth:`release` (:meth:`TrajectoryRecorder.hold`)."""
        self.recorder.hold(groups)

    def release(self, groups: set[int]) -> None:
        """Stop holding ``groups``: a tree rollout will not grow them further."""
        self.recorder.release(groups)

    def batch(self) -> StepBatch:
        """All trajectories finished so far."""
        self._close_crashed()
        return self.recorder.batch()

    def pop_batch(self) -> StepBatch:
        """All trajectories finished so far, then forget them."""
        self._close_crashed()
        out = self.recorder.batch()
        self.recorder.clear()
        return out
