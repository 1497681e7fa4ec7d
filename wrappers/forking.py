"""Forking members through a wrapper stack: the environment's state and every wrapper's state of the member.

:meth:`~agentgym_credit.envs.group_vector.GroupVectorEnv.branch` forks the members of the group vector env
(:mod:`agentgym_credit.envs.fork`), but Gymnasium's vector wrappers do not forward it, and the wrappers keep
their own state of each member: :class:`~agentgym_credit.wrappers.PromptObservations` its prompt history,
:class:`~agentgym_credit.wrappers.RecordStepBatch` where the member's recorded episode stands. The functions
here fork a member through the whole stack, for the tree rollouts of "Tree Search for LLM Agent
Reinforcement Learning" (Tree-GRPO, arXiv:2509.21240) and ARPO (arXiv:2507.19849):

* :func:`snapshot_members` takes a :class:`StackSnapshot` of members: the environment's
  :class:`~agentgym_credit.envs.fork.MemberSnapshot` and each wrapper's ``fork_state(member)``;
* :func:`restore_members` puts members (of the snapshot's task group, finished or never reset) in that
  state: the environment restores the snapshot, then each wrapper, innermost first, takes its state back
  with ``restore_fork_state(members, state, observations, infos)`` and returns what the members observe
  through it (the prompt wrapper renders the forked members' prompts; the recorder opens a segment of the
  tree batch for each, continuing the snapshot's step, so a shared prefix is stored once);
* :func:`branch_members` forks a live member into others at once.

A wrapper takes part by defining ``fork_state`` and ``restore_fork_state`` (and ``check_fork(members)``,
which refuses members before anything changes); a wrapper without them is taken to keep no state of its
own per member (:class:`~agentgym_credit.wrappers.ParseActions`). A :class:`StackSnapshot` restores only into
the stack it was taken from (the wrappers' classes, in order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gymnasium.vector import VectorEnv, VectorWrapper

from agentgym_credit.envs.fork import MemberSnapshot
from agentgym_credit.envs.group_vector import restore_failure

__all__ = ["StackSnapshot", "branch_members", "find_layer", "restore_members", "snapshot_members", "stack_layers"]


def stack_layers(env: VectorEnv) -> list[Any]:
    """The wrappers of ``env``, outermost first, then the vector env they wrap."""
    layers: list[Any] = []
    while isinstance(env, VectorWrapper):
        layers.append(env)
        env = env.env
    layers.append(env)
    return layers


def find_layer(env: VectorEnv, attribute: str) -> Any:
    """The outermost layer of ``env`` that has ``attribute`` (e.g. ``"recorder"``), or None."""
    return next((layer for layer in stack_layers(env) if hasattr(layer, attribute)), None)


def _layout(layers: list[Any]) -> tuple[str, ...]:
    return tuple(type(layer).__qualname__ for layer in layers)


@dataclass(frozen=True)
class StackSnapshot:
    """A member's state in a wrapper stack: the environment's snapshot and each forking wrapper's state.

    Attributes:
        member: the environment's :class:`~agentgym_credit.envs.fork.MemberSnapshot`.
        states: ``(layer index, state)`` of each wrapper that forks, outermost first.
        layout: the class names of the stack's layers, outermost first (a snapshot restores into that stack).
    """

    member: MemberSnapshot
    states: tuple[tuple[int, Any], ...]
    layout: tuple[str, ...]

    @property
    def depth(self) -> int:
        """The steps the member's episode had taken."""
        return int(self.member.elapsed)

    @property
    def group_id(self) -> int:
        """The task group (of the group vector env) the member belongs to."""
        return int(self.member.group_id)


def snapshot_members(env: VectorEnv, members: Sequence[int]) -> list[StackSnapshot]:
    """Each member's :class:`StackSnapshot` (the environment's snapshots in one request per worker).

    Raises:
        TypeError, ValueError, RuntimeError: as the group vector env's ``snapshots`` (a member without an
            episode, or whose snapshot failed), or as a wrapper's ``fork_state`` (the recorder: a member that
            is not playing a recorded episode).
    """
    layers = stack_layers(env)
    base, layout = layers[-1], _layout(layers)
    members = [int(m) for m in members]
    hooks = [(k, layer) for k, layer in enumerate(layers[:-1]) if hasattr(layer, "fork_state")]
    states = [tuple((k, layer.fork_state(i)) for k, layer in hooks) for i in members]  # refuses before any request
    snaps = base.snapshots(members) if hasattr(base, "snapshots") else [base.snapshot(i) for i in members]
    return [StackSnapshot(snap, state, layout) for snap, state in zip(snaps, states, strict=True)]


def restore_members(env: VectorEnv, members: Sequence[int], snapshot: StackSnapshot) -> tuple[list[Any], dict[str, Any]]:
    """Put ``members`` in the state of ``snapshot`` throughout the stack.

    When some members' restore fails, the members the environment did restore are forked through every wrapper
    all the same (the recorder opens their segments, the prompt wrapper renders their prompts), so no live member
    is left without its wrappers' state; then the error is raised.

    Returns:
        The members' observations as the outermost wrapper gives them (in the order of ``members``) and the
        vector infos (each key's ``_key`` mask set for the members).

    Raises:
        TypeError: ``snapshot`` is not a :class:`StackSnapshot`.
        ValueError: a snapshot of another wrapper stack, a member a wrapper refuses (the recorder: one still
            playing a recorded episode), or as the group vector env's ``restore`` (members outside the
            snapshot's group …); all checked before any member changes.
        RuntimeError: as the group vector env's ``restore`` (a worker died).
    """
    if not isinstance(snapshot, StackSnapshot):
        raise TypeError(f"restore_members takes a StackSnapshot from snapshot_members, got {type(snapshot).__name__}")
    layers = stack_layers(env)
    if _layout(layers) != snapshot.layout:
        raise ValueError(f"the snapshot was taken in the wrapper stack {snapshot.layout}, not this one "
                         f"({_layout(layers)}); restore it into the stack it was taken from")
    members = [int(m) for m in members]
    for layer in layers[:-1]:
        check = getattr(layer, "check_fork", None)
        if check is not None:
            check(members)
    base = layers[-1]
    if hasattr(base, "restore_each"):
        restored, obs, infos, failed = base.restore_each(members, snapshot.member)
    else:
        (obs, infos), restored, failed = base.restore(members, snapshot.member), members, {}
    obs = list(obs)
    if restored:  # the members the env restored take the wrappers' state too, also when others failed
        for k, state in reversed(snapshot.states):  # innermost first: each wrapper sees what the one inside gives
            obs, infos = layers[k].restore_fork_state(restored, state, obs, infos)
    if failed:
        raise restore_failure(failed, len(members))
    return obs, infos


def branch_members(env: VectorEnv, parent: int, children: Sequence[int]) -> tuple[list[Any], dict[str, Any]]:
    """Fork live member ``parent`` into ``children`` (other members of its task group) throughout the stack:
    :func:`snapshot_members` of the parent, restored into the children (:func:`restore_members`).

    Raises:
        ValueError: ``parent`` is among the children or its episode is over; otherwise as
            :func:`snapshot_members` and :func:`restore_members`.
    """
    parent = int(parent)
    if parent in [int(c) for c in children]:
        raise ValueError(f"member {parent} is both the parent and a child; children must be other members")
    if bool(stack_layers(env)[-1].finished[parent]):
        raise ValueError(f"member {parent}'s episode is over; branch a member that is playing")
    return restore_members(env, children, snapshot_members(env, [parent])[0])
