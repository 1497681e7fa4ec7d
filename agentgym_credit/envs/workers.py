"""What the process and Ray backends of the group vector env share: a slice of members and its requests.

A worker — a process (:class:`~agentgym_credit.envs.group_vector.GroupVectorEnv` with ``num_workers``) or
a Ray actor (:mod:`agentgym_credit.envs.ray_backend`) — builds members ``lo .. hi-1`` once from their
entry point (:func:`load_entry_point`) and answers ``reset`` / ``step`` / ``call`` / ``snapshot`` /
``restore`` requests for them with :func:`handle_request`. The group env runs in-process members with the
same :func:`member_reset`, :func:`member_step`, :func:`member_call`, :func:`member_snapshot` and
:func:`member_restore`, so a member behaves the same in every mode:

* ``member_step`` never raises: a member's exception ends its episode (``truncated=True``,
  ``info["crashed"] = True``, ``info["error"]``);
* ``member_reset``, ``member_call``, ``member_snapshot`` and ``member_restore`` return ``("ok", ...)`` or
  ``("error", ...)`` for the caller to report (a snapshot crosses to the member it is restored into
  pickled, like every request);
* a worker's reply crosses a pipe or the Ray object store pickled; :func:`sendable_reply` replaces what
  cannot be pickled by its ``repr`` (info values are named in ``info["unpicklable_info"]``) and an
  exception that cannot be rebuilt on the other side by a ``RuntimeError`` with its text.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_type_hints

import gymnasium as gym

from agentgym_credit.argtypes import brief_repr, check_type, close_match

__all__ = [
    "check_constructor_kwargs",
    "error_text",
    "handle_request",
    "load_entry_point",
    "member_apply",
    "member_call",
    "member_reset",
    "member_restore",
    "member_snapshot",
    "member_step",
    "picklable",
    "stand_in",
    "sendable_reply",
]

STAND_IN_CHARS = 500
"""The longest ``repr`` that replaces a value which does not pickle in a worker's reply."""


def load_entry_point(entry_point: str | Callable[..., gym.Env]) -> Callable[..., gym.Env]:
    """Resolve ``"module:Class"`` to the callable."""
    if callable(entry_point):
        return entry_point
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


def check_constructor_kwargs(entry_point: str | Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """Check keyword arguments against a constructor's signature before anything is built.

    An argument the constructor does not take, or whose value does not fit its scalar annotation
    (:func:`~agentgym_credit.argtypes.check_type`: ``max_steps="5"``), fails here in the caller's process
    (a group env checks its members' arguments so, with or without workers). An entry point that cannot be
    imported here is left to the members (the workers report it).

    Args:
        entry_point: ``"module:Class"`` or the class (or function) itself.
        kwargs: the keyword arguments.

    Raises:
        TypeError: naming the argument (with the closest accepted name, or the spelling to use).
    """
    try:
        factory = load_entry_point(entry_point)
        signature = inspect.signature(factory)
        hints = get_type_hints(factory.__init__ if isinstance(factory, type) else factory)
    except (ImportError, AttributeError, TypeError, ValueError, NameError):
        return
    params = signature.parameters
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for name, value in kwargs.items():
        if name not in named:
            if takes_any:
                continue
            what = getattr(factory, "__name__", str(entry_point))
            raise TypeError(f"{what} takes no argument {name!r}"
                            f"{close_match(name, named) or '; it takes ' + ', '.join(named)}")
        if name in hints:
            check_type(name, value, hints[name])


def error_text(exc: BaseException) -> str:
    """``"Type: message"`` of an exception, as crash reports give it."""
    return f"{type(exc).__name__}: {exc}"


def member_step(env: gym.Env, action: Any) -> tuple[Any, float, bool, bool, dict]:
    """One member's step, never raising: an exception ends its episode (``truncated``, ``info["crashed"]``)."""
    try:
        obs, reward, terminated, truncated, info = env.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), dict(info)
    except Exception as exc:  # a member bug must not take the batch down
        return None, 0.0, False, True, {"crashed": True, "error": error_text(exc)}


def member_reset(env: gym.Env, seed: int | None, options: dict[str, Any]) -> tuple:
    """``("ok", obs, info)`` or ``("error", "Type: message")``: one member's reset, never raising."""
    try:
        obs, info = env.reset(seed=seed, options=options)
        return "ok", obs, dict(info)
    except Exception as exc:
        return "error", error_text(exc)


def member_snapshot(env: gym.Env) -> tuple:
    """``("ok", snapshot)`` or ``("error", "Type: message")``: one member's ``snapshot()``, never raising."""
    try:
        return "ok", env.unwrapped.snapshot()
    except Exception as exc:
        return "error", error_text(exc)


def member_restore(env: gym.Env, snapshot: Any) -> tuple:
    """``("ok", obs, info)`` or ``("error", "Type: message")``: one member's ``restore(snapshot)``, never raising."""
    try:
        obs, info = env.unwrapped.restore(snapshot)
        return "ok", obs, dict(info)
    except Exception as exc:
        return "error", error_text(exc)
def member_apply(env: gym.Env, fn: Callable[..., Any], args: tuple) -> tuple[str, Any]:
    """``("ok", value)`` or ``("error", exception)``: ``fn(member, *args)`` on one member's unwrapped env."""
    try:
        return "ok", fn(env.unwrapped, *args)
    except Exception as exc:
        return "error", exc


def member_call(env: gym.Env, name: str, args: tuple, kwargs: dict) -> tuple[str, Any]:
    """``("ok", value)`` or ``("error", exception)``: one member's attribute or method call."""
    try:
        attr = getattr(env.unwrapped, name)
        return "ok", attr(*args, **kwargs) if callable(attr) else attr
    except Exception as exc:
        return "error", exc


def stand_in(value: Any) -> str:
    """What crosses the process boundary in place of a value that does not pickle: its ``repr``, at most
    :data:`STAND_IN_CHARS` characters (:func:`~agentgym_credit.argtypes.brief_repr`: never raises)."""
    return brief_repr(value, limit=STAND_IN_CHARS)


def picklable(value: Any) -> bool:
    """Whether ``value`` pickles (so it can cross to or from a worker)."""
    try:
        pickle.dumps(value)
        return True
    except Exception:
        return False


def sendable_reply(cmd: str, item: tuple) -> tuple:
    """One member's reply, with whatever cannot be pickled replaced by its ``repr`` (see the module docstring)."""
    if cmd in ("call", "apply") and item[1] == "error":
        try:  # an exception must also rebuild on the other side (custom __init__ signatures may not)
            pickle.loads(pickle.dumps(item))
            return item
        except Exception:
            return item[0], "error", RuntimeError(error_text(item[2]))
    if picklable(item):
        return item
    j, *res = item
    if cmd == "snapshot":
        return j, "error", f"TypeError: the member's snapshot cannot be pickled to leave its worker: {stand_in(res[-1])}"
    if cmd in ("call", "apply"):
        status, value = res
        what = value if status == "error" else f"value {stand_in(value)}"
        return j, "error", TypeError(f"the member's answer cannot be sent from its worker process: {what}")
    info = res[-1]
    if isinstance(info, dict) and not picklable(info):
        bad = sorted(str(k) for k, v in info.items() if not picklable(v))
        info = {(k if picklable(k) else stand_in(k)): (v if picklable(v) else stand_in(v))
                for k, v in info.items()}
        info["unpicklable_info"] = bad
    res = [v if picklable(v) else stand_in(v) for v in res[:-1]] + [info]
    return (j, *res)


def handle_request(envs: Sequence[gym.Env], cmd: str, payload: Any) -> list[tuple]:
    """A worker's replies to one request for its members (indices local to the worker), ready to send.

    Args:
        envs: the worker's members.
        cmd: ``"reset"`` (payload: ``(j, seed, options)`` per member), ``"step"`` (payload: ``(j, action)``
            per member), ``"call"`` (payload: ``(name, args, kwargs)``, asked of every member), ``"apply"``
            (payload: ``(fn, [(j, args), …])``: ``fn(member j, *args)``), ``"snapshot"`` (payload:
            ``(j, None)`` per member) or ``"restore"`` (payload: ``(j, snapshot)`` per member).
        payload: as above.

    Returns:
        One :func:`sendable_reply` per member: ``(j, *member_reset(...))``, ``(j, *member_step(...))``,
        ``(j, *member_call(...))``, ``(j, *member_apply(...))``, ``(j, *member_snapshot(...))`` or
        ``(j, *member_restore(...))``.

    Raises:
        ValueError: an unknown request.
    """
    if cmd == "reset":
        out = [(j, *member_reset(envs[j], seed, opts)) for j, seed, opts in payload]
    elif cmd == "step":
        out = [(j, *member_step(envs[j], a)) for j, a in payload]
    elif cmd == "call":
        name, args, kw = payload
        out = [(j, *member_call(env, name, args, kw)) for j, env in enumerate(envs)]
    elif cmd == "apply":
        fn, calls = payload
        out = [(j, *member_apply(envs[j], fn, args)) for j, args in calls]
    elif cmd == "snapshot":
        out = [(j, *member_snapshot(envs[j])) for j, _ in payload]
    elif cmd == "restore":
        out = [(j, *member_restore(envs[j], snap)) for j, snap in payload]
    else:
        raise ValueError(
            f"unknown worker request {cmd!r}; expected 'reset', 'step', 'call', 'apply', 'snapshot' "
            "or 'restore'"
        )
    return [sendable_reply(cmd, item) for item in out]
