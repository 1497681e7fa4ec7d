"""The member-environment contract shared by every group environment.

A *member* is one trajectory's environment: a :class:`gymnasium.Env` with text observations and text
actions. Subclasses implement two hooks, :meth:`GroupMemberEnv._reset_task` and
:meth:`GroupMemberEnv._step_action`; this base class owns what must be identical everywhere:

* ``reset(seed=s)`` is deterministic: the same seed gives the same task and initial state, so the
  members of a group (reset with one seed) start from the identical state.
* ``info`` always carries ``anchor``, ``admissible_actions``, ``won``, ``task``, ``task_id``,
  ``group_id`` and ``action_valid`` (documentation: design, "The environment contract").
* Every ``info`` that ``reset`` and ``step`` return is the caller's own copy: changing it (appending to its
  ``admissible_actions``, rewriting its ``anchor``) changes nothing in the env, which keeps its own.
* An action that is not a string, or any action after the episode has ended, is a clean invalid step
  (observation unchanged, reward 0), never an exception. A step after the end repeats the episode's
  final ``terminated`` / ``truncated`` flags (a truncated episode never reports ``terminated=True``).
* Episodes are truncated after ``max_steps`` steps.
* There is a live episode only after a ``reset()`` that succeeded: ``step()`` before the first reset,
  or after a ``reset()`` that raised (for any reason, bad arguments included), raises
  :class:`~agentgym_credit.errors.ResetNeeded`. A failed reset never continues or revives the episode
  that was running before it.
* ``reset()`` checks its arguments the same way in every environment: ``seed`` is None or a
  non-negative integer (``int`` or a numpy integer); ``options`` is None or a mapping with ``str`` keys;
  integer-valued options (``group_id`` and names ending in ``_id``, ``_index`` or ``_seed``) given as
  floats must be whole numbers (a fraction is refused, never truncated); ``group_id`` is a non-negative
  integer and defaults to 0 on every reset (it does not carry over from an earlier reset). An option an
  environment reads as an integer (a position, an id, a seed) is checked with :func:`integer_option`:
  an integer in its range, else a ``TypeError`` / ``ValueError`` that names the option; an option naming
  an item by its id with :func:`id_option`.
* A member forks mid-episode: :meth:`GroupMemberEnv.snapshot` returns a picklable
  :class:`~agentgym_credit.envs.fork.MemberSnapshot` and :meth:`GroupMemberEnv.restore` puts any member of
  the same class and settings (in any process) in exactly that state — observation, info, step count,
  ``np_random``, the episode's history and the engine state (:mod:`agentgym_credit.envs.fork`). Every
  member forks by *replay* through this class alone (reset with the recorded arguments and ``np_random``
  state, then the recorded actions); a member whose state is cheap to copy forks *natively* with one
  class attribute (``fork_attributes``, the attributes that hold its state) or with the two hooks
  ``_snapshot_state`` / ``_restore_state``.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from agentgym_credit.argtypes import brief_repr, check_type
from agentgym_credit.envs.fork import (
    FORK_METHODS,
    MemberSnapshot,
    ResetRecord,
    check_snapshot,
    env_class_name,
    generator_from_state,
    generator_state,
)
from agentgym_credit.envs.spaces import FreeText
from agentgym_credit.envs.workers import picklable
from agentgym_credit.errors import ResetNeeded

__all__ = [
    "GroupMemberEnv",
    "StepOutcome",
    "NonTextAction",
    "REQUIRED_INFO_KEYS",
    "INVALID_ACTION_OBSERVATION",
    "as_text_action",
    "check_seed",
    "non_text_error",
    "check_reset_options",
    "integer_option",
    "id_option",
]

REQUIRED_INFO_KEYS = ("anchor", "admissible_actions", "won", "task", "task_id", "group_id", "action_valid")
INVALID_ACTION_OBSERVATION = "Nothing happens."


_INTEGER_OPTION_SUFFIXES = ("_id", "_index", "_seed")


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """``seed`` as a Python ``int`` (or None), refusing anything that is not a non-negative integer.

    Args:
        seed: None, an ``int`` or a numpy integer.
        name: how to call the argument in the error message.

    Raises:
        TypeError: ``seed`` is not an integer (floats, strings and bools are refused).
        ValueError: ``seed`` is negative.
    """
    if seed is None:
        return None
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer):
        raise TypeError(
            f"{name} must be a non-negative int or None, got {type(seed).__name__} ({brief_repr(seed)})"
        )
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative int or None, got {brief_repr(seed)}")
    return int(seed)


def _integer_option(key: str, value: Any) -> Any:
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"options[{key!r}] must be an integer, got bool {value!r}")
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        if not np.isfinite(value) or value != np.floor(value):
            raise ValueError(f"options[{key!r}] must be an integer, got {float(value)!r} (fractions are not truncated)")
        return int(value)
    return value


def check_reset_options(options: Any) -> dict[str, Any]:
    """A fresh dict of ``reset`` options, checked as the module docstring states.

    Raises:
        TypeError: ``options`` is not a mapping, a key is not a ``str``, or ``group_id`` is not an integer.
        ValueError: an integer-valued option holds a fractional or non-finite float, or ``group_id`` is
            negative.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        kind = type(options).__name__
        raise TypeError(f"options must be a dict or None, got {kind} ({brief_repr(options)})")
    out: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise TypeError(f"option names must be str, got {type(key).__name__} ({brief_repr(key)})")
        if key == "group_id" or key.endswith(_INTEGER_OPTION_SUFFIXES):
            value = _integer_option(key, value)
        out[key] = value
    if "group_id" in out and integer_option(out, "group_id") is None:
        raise TypeError("options['group_id'] must be a non-negative int, got None (leave it out for group 0)")
    return out


def integer_option(options: Mapping[str, Any], key: str, size: int | None = None) -> int | None:
    """``options[key]`` as a Python ``int`` in ``[0, size)`` (no upper bound when ``size`` is None).

    Takes the options as :func:`check_reset_options` returns them (numpy integers and whole floats
    already turned into ``int``).

    Args:
        options: the checked reset options.
        key: the option's name.
        size: the number of valid values (positions ``0 … size-1``), or None for any non-negative int.

    Returns:
        The value, or None when ``key`` is not in ``options`` or holds None (the option's default).

    Raises:
        TypeError: the value is not an integer (strings, bools and other types are refused, not parsed).
        ValueError: the value is negative or not below ``size``.
    """
    value = options.get(key)
    if value is None:
        return None
    bounds = "a non-negative int" if size is None else f"an int in [0, {size})"
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        kind = type(value).__name__
        raise TypeError(f"options[{key!r}] must be {bounds}, got {kind} ({brief_repr(value)})")
    value = int(value)
    if value < 0 or (size is not None and value >= size):
        raise ValueError(f"options[{key!r}] must be {bounds}, got {brief_repr(value)}")
    return value


def id_option(
    options: Mapping[str, Any], key: str, positions: Mapping[str, int], collection: str
) -> int | None:
    """The position of the item whose id ``options[key]`` names (None when the option is absent or None).

    Args:
        options: the checked reset options.
        key: the option's name (e.g. ``"task_id"``).
        positions: item id -> position, for every item the environment can reset to.
        collection: how the error message calls the items (e.g. ``"env.questions"``).

    Raises:
        TypeError: the value is not a ``str``.
        ValueError: no item has that id.
    """
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(
            f"options[{key!r}] must be a str (the id of one of {collection}), "
            f"got {type(value).__name__} ({brief_repr(value)})"
        )
    if value not in positions:
        raise ValueError(
            f"unknown {key} {brief_repr(value)}: options[{key!r}] must be the id of one of {collection}"
        )
    return positions[value]


@dataclass(frozen=True)
class NonTextAction:
    """Stand-in for an action that is not a ``str`` (made before an action crosses a process boundary).

    A member treats it exactly like the original non-text action: a clean invalid step whose error
    names the original type. Being a small frozen dataclass it always pickles, so a group vector env
    with worker processes behaves like one without.

    Attributes:
        type_name: the original action's type name.
        text: a short ``repr`` of the original action.
    """

    type_name: str
    text: str


def as_text_action(action: Any) -> str | NonTextAction:
    """``action`` as a plain ``str``, or a :class:`NonTextAction` standing in for it.

    ``str`` subclasses become plain ``str`` (their class may not exist in a worker process).
    """
    if isinstance(action, str):
        return action if type(action) is str else str.__str__(action)
    if isinstance(action, NonTextAction):
        return action
    try:
        text = repr(action)
    except Exception as exc:  # a broken __repr__ must not stop the step
        text = f"<{type(action).__name__} with failing repr: {type(exc).__name__}>"
    return NonTextAction(type(action).__name__, text[:200])


def non_text_error(action: NonTextAction) -> str:
    """``info["error"]`` of a step whose action is not text: ``"actions are text; got int 0 (pass the command
    as a str)"`` (the value is left out where its ``repr`` is only the object's address, which differs between
    processes)."""
    value = "" if " at 0x" in action.text else f" {action.text}"
    return f"actions are text; got {action.type_name}{value} (pass the command as a str)"


@dataclass
class StepOutcome:
    """What a member environment's :meth:`GroupMemberEnv._step_action` returns.

    Attributes:
        observation: the text shown to the agent after the action.
        reward: the environment's own reward for this step.
        won: whether the task is now solved.
        terminated: whether the episode ended (solved or failed for good).
        action_valid: whether the action was well formed and admissible.
        anchor: the state key text for credit assignment (observation without history, deterministic).
        info: any further environment-specific info keys.
    """

    observation: str
    reward: float
    won: bool
    terminated: bool
    action_valid: bool
    anchor: str
    info: dict[str, Any] = field(default_factory=dict)


_ATOMS = (str, int, float, bool, type(None))


def _caller_copy(value: Any) -> Any:
    """A copy of an info (``value``) that shares nothing mutable with it, as ``copy.deepcopy`` gives, with the dicts
    and lists of plain values an env's info is made of copied directly (a Sokoban info in about 1.4 µs against
    5 µs: it is copied at every step); anything else is deep-copied."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: _caller_copy(item) for key, item in value.items()}
    if kind is list:
        return [_caller_copy(item) for item in value]
    return copy.deepcopy(value)


class GroupMemberEnv(gym.Env, ABC):
    """Base class of all member environments (one trajectory each).

    Args:
        max_steps: episode length after which ``truncated`` is set.
        render_mode: ``"ansi"`` (text) or an environment-specific mode such as ``"rgb_array"``.

    Forking (:meth:`snapshot` / :meth:`restore`): a subclass needs nothing to fork by replay, which
    only asks that the member be deterministic (the same reset arguments, ``np_random`` state and actions
    give the same episode). To fork natively, a subclass either names the attributes that hold its
    episode state in ``fork_attributes`` (deep-copied into the snapshot and out of it), or sets
    ``fork_method = "native"`` and implements :meth:`_snapshot_state` / :meth:`_restore_state`. It
    lists the constructor settings a restoring member must share in :meth:`_fork_settings`.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}
    #: How the member forks: ``"replay"`` (the default) or ``"native"`` (see :mod:`~agentgym_credit.envs.fork`).
    fork_method: ClassVar[str] = "replay"
    #: Attributes holding the episode state of a natively forking member; a class that sets them forks
    #: natively unless it sets ``fork_method`` itself.
    fork_attributes: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("fork_attributes") and "fork_method" not in cls.__dict__:
            cls.fork_method = "native"
        if cls.fork_method not in FORK_METHODS:
            raise TypeError(f"{cls.__name__}.fork_method must be one of {FORK_METHODS}, got {cls.fork_method!r}")

    def __init__(self, max_steps: int, render_mode: str | None = None) -> None:
        check_type("max_steps", max_steps, int)
        if max_steps <= 0:
            raise ValueError(f"max_steps must be positive, got {max_steps}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} is not supported; choose one of {self.metadata['render_modes']}"
            )
        self.max_steps = int(max_steps)
        self.render_mode = render_mode
        self.observation_space = FreeText()
        self.action_space = FreeText()
        self._elapsed = 0
        self._finished = True
        self._terminated = False
        self._truncated = False
        self._needs_reset = "reset() has not been called yet"
        self._group_id = 0
        self._last_obs = ""
        self._last_info: dict[str, Any] = {}
        self._actions: list[str | NonTextAction] = []
        self._reset_record: ResetRecord | None = None
        self._reset_picklable: bool | None = None
        self._pending_reset_rng: dict[str, Any] | None = None
        self._step_error = ""

    # ----------------------------------------------------------------- hooks
    @abstractmethod
    def _reset_task(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Pick a task with ``self.np_random`` (already seeded) and set up its initial state.

        Returns:
            The initial observation and an info dict with at least ``anchor``, ``admissible_actions``,
            ``task`` and ``task_id``.
        """

    @abstractmethod
    def _step_action(self, action: str) -> StepOutcome:
        """Apply one action (a string) to the live episode."""

    # ------------------------------------------------------------ public API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start an episode (see the module docstring for the checks of ``seed`` and ``options``).

        If this raises, the environment has no live episode until the next successful reset.
        """
        self._finished = True
        self._needs_reset = "the last reset() raised"
        pending, self._pending_reset_rng = self._pending_reset_rng, None
        seed = check_seed(seed)
        options = check_reset_options(options)
        recorded = _private_copy(options)
        group_id = options.pop("group_id", 0)
        super().reset(seed=seed)
        if pending is not None:  # a replay draws the task from the recorded generator state
            self._np_random = generator_from_state(pending)
        rng_state = generator_state(self.np_random)
        obs, info = self._reset_task(options)
        self._group_id = group_id
        info = self._complete_info(info, won=False, action_valid=True)
        self._elapsed = 0
        self._terminated = self._truncated = False
        self._last_obs, self._last_info = obs, info
        self._actions = []
        self._reset_record = ResetRecord(seed, recorded, rng_state)
        self._reset_picklable = None
        self._step_error = ""
        self._finished = False
        self._needs_reset = ""
        return obs, _caller_copy(info)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        if self._needs_reset:
            raise ResetNeeded(
                f"{type(self).__name__}.step() needs a live episode but {self._needs_reset}; call reset() first"
            )
        if self._finished:
            info = dict(_caller_copy(self._last_info), action_valid=False, episode_over=True)
            return self._last_obs, 0.0, self._terminated, self._truncated, info
        self._elapsed += 1
        try:
            if not isinstance(action, str):
                outcome = self._invalid_step(non_text_error(as_text_action(action)))
            else:
                outcome = self._step_action(action)
        except Exception as exc:  # the episode's state is unknown from here on: it cannot be forked
            self._step_error = f"step {self._elapsed} raised {type(exc).__name__}"
            raise
        self._actions.append(as_text_action(action))
        truncated = (not outcome.terminated) and self._elapsed >= self.max_steps
        info = dict(outcome.info)
        info.setdefault("admissible_actions", self._last_info.get("admissible_actions", []))
        info.setdefault("task", self._last_info.get("task", ""))
        info.setdefault("task_id", self._last_info.get("task_id", ""))
        info["anchor"] = outcome.anchor
        info = self._complete_info(info, won=outcome.won, action_valid=outcome.action_valid)
        self._terminated, self._truncated = bool(outcome.terminated), bool(truncated)
        self._finished = outcome.terminated or truncated
        self._last_obs, self._last_info = outcome.observation, info
        return (outcome.observation, float(outcome.reward), bool(outcome.terminated), bool(truncated),
                _caller_copy(info))

    def render(self) -> Any:
        if self.render_mode == "ansi":
            return self._last_obs
        return None

    # -------------------------------------------------------------- helpers
    def _invalid_step(self, error: str, observation: str | None = None, **info: Any) -> StepOutcome:
        """A clean invalid step: state unchanged, reward 0, ``action_valid=False``, ``info["error"]``.

        Args:
            error: what was wrong with the action.
            observation: the observation to show (default: the current one, unchanged).
            **info: further info keys of the step.
        """
        return StepOutcome(
            observation=self._last_obs if observation is None else observation,
            reward=0.0,
            won=False,
            terminated=False,
            action_valid=False,
            anchor=self._last_info["anchor"],
            info={**info, "error": error},
        )

    # ----------------------------------------------------------------- fork
    def snapshot(self) -> MemberSnapshot:
        """The member's current state, to :meth:`restore` into any member of the same class and settings.

        A snapshot of an ended episode is allowed: restored, it gives a member whose episode is over
        (every step a no-op repeating the final flags).

        Returns:
            A picklable :class:`~agentgym_credit.envs.fork.MemberSnapshot` that shares nothing mutable with
            the member (stepping the member on does not change it).

        Raises:
            ResetNeeded: there is no episode (before the first reset, or after one that raised).
            RuntimeError: the episode's last ``step()`` raised, so its state is unknown.
            TypeError: the episode's reset options cannot be pickled.
        """
        if self._needs_reset:
            raise ResetNeeded(
                f"{type(self).__name__}.snapshot() needs an episode but {self._needs_reset}; call reset() first"
            )
        if self._step_error:
            raise RuntimeError(
                f"{type(self).__name__}.snapshot() cannot copy an episode whose {self._step_error}; "
                "reset() the member"
            )
        if self._reset_picklable is None:
            self._reset_picklable = picklable(self._reset_record)
        if not self._reset_picklable:
            raise TypeError(
                f"{type(self).__name__}.snapshot() needs picklable reset options (a snapshot travels pickled); "
                "reset with options that pickle"
            )
        return self._take_snapshot()

    def restore(self, snapshot: MemberSnapshot) -> tuple[str, dict[str, Any]]:
        """Put the member in the state of ``snapshot`` (taken from a member of the same class and settings).

        The member's own episode, if any, is replaced. A ``"replay"`` snapshot resets the member and steps
        its recorded actions again, checking that the replay reaches the snapshot's observation, step
        count and flags.

        Returns:
            The snapshot's observation and info (a copy), as the member would report them now.

        Raises:
            TypeError: ``snapshot`` is not a :class:`~agentgym_credit.envs.fork.MemberSnapshot`.
            ValueError: the snapshot belongs to another class, version or settings, is corrupt, or its
                replay does not reach its state. The member is left as it was (its episode, or its
                need of a reset).
        """
        check_snapshot(snapshot, env_class_name(type(self)), self.fork_method, self._fork_settings(), self.max_steps)
        if not all(isinstance(a, str | NonTextAction) for a in snapshot.actions):
            raise ValueError(
                "the snapshot is corrupt (an action of its history is neither a str nor a NonTextAction); "
                "take a new snapshot() of the member to fork"
            )
        backup = self._backup()
        try:
            self._apply_snapshot(snapshot)
        except Exception as exc:
            self._roll_back(backup)
            if isinstance(exc, ValueError | TypeError):
                raise
            raise ValueError(
                f"{type(self).__name__} could not restore the snapshot ({type(exc).__name__}: {exc}); "
                "the member was left as it was"
            ) from exc
        return self._last_obs, _caller_copy(self._last_info)

    @property
    def action_history(self) -> tuple[str | NonTextAction, ...]:
        """The actions stepped in the current episode, oldest first (what a replay steps again)."""
        return tuple(self._actions)

    def _fork_settings(self) -> dict[str, Any]:
        """Construction settings a restoring member must share with the snapshot's (extend in subclasses)."""
        return {"max_steps": self.max_steps}

    def _snapshot_state(self) -> Any:
        """The environment's own state for a snapshot; with ``fork_method = "replay"``, what the replay does
        not rebuild (None: nothing).

        The default deep-copies the ``fork_attributes``. An override must return a picklable value that
        shares nothing mutable with the member.
        """
        if not self.fork_attributes:
            return None
        return {name: copy.deepcopy(getattr(self, name)) for name in self.fork_attributes}

    def _restore_state(self, state: Any) -> None:
        """Put back what :meth:`_snapshot_state` returned (after the replay, under ``"replay"``).

        An override checks ``state`` before it changes anything (raising ``ValueError`` on a corrupt one)
        and copies whatever is mutable, since one snapshot may be restored into several members.
        """
        if not self.fork_attributes:
            if state is not None:
                raise ValueError(f"the snapshot is corrupt (unexpected engine state for {type(self).__name__})")
            return
        if not isinstance(state, dict) or set(state) != set(self.fork_attributes):
            raise ValueError(
                f"the snapshot is corrupt (its engine state must hold {sorted(self.fork_attributes)}); "
                "take a new snapshot() of the member to fork"
            )
        copies = {name: copy.deepcopy(state[name]) for name in self.fork_attributes}
        for name, value in copies.items():
            setattr(self, name, value)

    def _take_snapshot(self) -> MemberSnapshot:
        assert self._reset_record is not None
        return MemberSnapshot(
            env_class=env_class_name(type(self)),
            method=self.fork_method,
            settings=self._fork_settings(),
            elapsed=self._elapsed,
            terminated=self._terminated,
            truncated=self._truncated,
            finished=self._finished,
            group_id=self._group_id,
            observation=self._last_obs,
            info=copy.deepcopy(self._last_info),
            rng_state=generator_state(self.np_random),
            rng_seed=self._np_random_seed,
            reset=self._reset_record,
            actions=tuple(self._actions),
            state=self._snapshot_state(),
        )

    def _replays(self, state: Any) -> bool:
        """Whether a ``"native"`` snapshot with this engine ``state`` is restored by a replay all the same (a
        state that could not be copied at that step, e.g. AppWorld's REPL variables that do not pickle);
        its ``_restore_state`` then runs after the replay, as under ``"replay"``. Default: never."""
        return False

    def _apply_snapshot(self, snapshot: MemberSnapshot) -> None:
        if snapshot.method == "replay" or self._replays(snapshot.state):
            self._replay(snapshot)
        else:
            self._restore_state(snapshot.state)
        self._elapsed = int(snapshot.elapsed)
        self._terminated, self._truncated = snapshot.terminated, snapshot.truncated
        self._group_id = int(snapshot.group_id)
        self._last_obs, self._last_info = snapshot.observation, copy.deepcopy(snapshot.info)
        self._np_random = generator_from_state(snapshot.rng_state)
        self._np_random_seed = None if snapshot.rng_seed is None else int(snapshot.rng_seed)
        self._actions = list(snapshot.actions)
        self._reset_record = snapshot.reset
        self._reset_picklable = None
        self._step_error = ""
        self._finished = snapshot.finished
        self._needs_reset = ""

    def _replay(self, snapshot: MemberSnapshot) -> None:
        """Reset with the snapshot's reset arguments and ``np_random`` state, step its actions, check the end."""
        record = snapshot.reset
        self._pending_reset_rng = record.rng_state
        self.reset(seed=record.seed, options=copy.deepcopy(record.options))
        for action in snapshot.actions:
            self.step(action)
        reached = (self._last_obs, self._elapsed, self._terminated, self._truncated)
        if reached != (snapshot.observation, snapshot.elapsed, snapshot.terminated, snapshot.truncated):
            raise ValueError(
                f"replaying the snapshot's {len(snapshot.actions)} actions from its reset did not reach its "
                f"state (the snapshot was altered or {type(self).__name__} is not deterministic); take a new "
                "snapshot() of the member to fork"
            )
        if snapshot.state is not None:
            self._restore_state(snapshot.state)

    def _backup(self) -> tuple[MemberSnapshot | None, dict[str, Any]]:
        """What :meth:`_roll_back` needs to leave the member as it is now."""
        episode = None if self._needs_reset or self._step_error else self._take_snapshot()
        rng = None if self._np_random is None else generator_state(self._np_random)
        fields = {"needs_reset": self._needs_reset, "step_error": self._step_error, "rng": rng,
                  "rng_seed": self._np_random_seed}
        return episode, fields

    def _roll_back(self, backup: tuple[MemberSnapshot | None, dict[str, Any]]) -> None:
        episode, fields = backup
        if episode is not None:
            try:
                self._apply_snapshot(episode)
                return
            except Exception:  # the earlier episode cannot come back: leave no episode rather than a mix
                fields["needs_reset"] = "a restore() failed and the earlier episode could not be put back"
        self._finished = True
        self._needs_reset = fields["needs_reset"] or f"a restore() replaced an episode whose {fields['step_error']}"
        self._step_error = ""
        self._np_random = None if fields["rng"] is None else generator_from_state(fields["rng"])
        self._np_random_seed = fields["rng_seed"]

    @property
    def needs_reset(self) -> bool:
        """True while there is no live or ended episode to step (before the first reset, after a failed one)."""
        return bool(self._needs_reset)

    @property
    def episode_over(self) -> bool:
        """True when the episode has ended (or none is live); further steps are no-ops or raise."""
        return self._finished

    @property
    def elapsed_steps(self) -> int:
        """Steps taken in the current episode."""
        return self._elapsed

    def _complete_info(self, info: dict[str, Any], *, won: bool, action_valid: bool) -> dict[str, Any]:
        missing = [k for k in ("anchor", "admissible_actions", "task", "task_id") if k not in info]
        if missing:
            raise RuntimeError(f"{type(self).__name__} did not provide info keys {missing}")
        info["won"] = bool(won)
        info["action_valid"] = bool(action_valid)
        info["group_id"] = self._group_id
        info["admissible_actions"] = list(info["admissible_actions"])
        return info

    @staticmethod
    def rng_choice(rng: np.random.Generator, n: int) -> int:
        """A deterministic index in ``range(n)`` drawn from ``rng``."""
        return int(rng.integers(n))


def _private_copy(options: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of checked reset options (a shallow one where a value cannot be deep-copied)."""
    try:
        return copy.deepcopy(options)
    except Exception:
        return dict(options)
