"""The group vector env: G task groups × N members, each group from one identical initial state.

Members ``g*N .. g*N+N-1`` form group ``g``. ``reset(seed=s)`` resets member ``i`` with seed
``s + i // N`` (the verl-agent convention), so every member of a group gets the same task and initial
state; with ``seed=None`` each group draws a fresh seed from the env's own generator (seeded once at
construction or by the last seeded reset). Autoreset is ``DISABLED``: a finished member stays finished
— stepping it is a no-op (same observation, reward 0, ``info["active"] = False``) — until it is reset,
either by ``reset()`` or by ``reset(options={"reset_mask": mask})``.

Members run in this process (``num_workers=0``) or in worker processes (``num_workers=W``) that each
hold a contiguous slice of members, with the same results either way:

* Actions are checked before they are sent: a ``str`` goes as a plain ``str``, anything else as a
  :class:`~agentgym_credit.envs.base.NonTextAction` (a clean invalid step in the member), so an
  action that cannot be pickled never reaches a pipe and the parent, the workers and a recorder stay in
  step.
* An exception raised by one member's ``step`` ends that member's episode (``truncated=True``,
  ``info["crashed"] = True``, ``info["error"]``); the other members are untouched.
* A member's ``reset`` that raises is caught per member; once every selected member was tried,
  ``reset()`` raises :class:`~agentgym_credit.errors.ResetError` naming each failing member, and every
  member it selected is left needing reset (``step()`` treats them as finished; ``step()`` raises
  :class:`~agentgym_credit.errors.ResetNeeded` when no member has a live episode, e.g. before the first
  reset).
* ``call(name)`` raises the member's own exception (e.g. ``AttributeError`` for a missing attribute).
* ``reset`` options and ``call`` arguments must be picklable (checked in both modes, ``TypeError``).
* With workers only: an info value that cannot be pickled is replaced by its ``repr`` and named in
  ``info["unpicklable_info"]`` (the worker and the member's episode go on).

A live member forks into others of its group: ``branch(parent, children)`` snapshots member ``parent``
and restores the snapshot into each child (across worker processes and Ray actors the snapshot travels
pickled; :mod:`agentgym_credit.envs.fork`), so the children continue independently from the parent's exact
state; each child's earlier episode, if any, is replaced.

A worker that dies is reported (``info["worker_error"]``; its active members end the episode with
``truncated=True`` and ``info["crashed"] = True``) and replaced with fresh members; the other members
and their records are untouched. A worker that dies during ``reset()`` is replaced and its members'
resets are tried once more on the replacement. A replacement that cannot start does not fail the request
that found the worker dead: its members end as crashed (``info["worker_error"]`` says it could not be
restarted), the other members' results are returned, and every later request for its members tries to start
one again (``reset()`` raises :class:`~agentgym_credit.errors.ResetError` for them meanwhile). A worker that
cannot start at construction (its members' constructor
raises, or a script without an ``if __name__ == "__main__":`` guard under the ``spawn`` start method)
raises :class:`~agentgym_credit.errors.WorkerStartError` when the env is built. ``reset``, ``step`` and
``call`` after ``close()`` raise :class:`~agentgym_credit.errors.EnvClosedError`.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import traceback
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agentgym_credit.argtypes import brief_repr, check_type
from agentgym_credit.envs.base import as_text_action, check_reset_options, check_seed
from agentgym_credit.envs.fork import MemberSnapshot
from agentgym_credit.envs.spaces import FreeText
from agentgym_credit.envs.workers import (
    check_constructor_kwargs,
    error_text,
    handle_request,
    load_entry_point,
    member_apply,
    member_call,
    member_reset,
    member_restore,
    member_snapshot,
    member_step,
    picklable,
)
from agentgym_credit.errors import EnvClosedError, ResetError, ResetNeeded, WorkerStartError

__all__ = [
    "GroupVectorEnv",
    "check_group_env_kwargs",
    "group_env_options",
    "make_group_vector_env",
    "member_actions",
    "restore_failure",
]


def member_actions(actions: Any, num_envs: int) -> list[Any]:
    """``actions`` as a list of one action per member, checked before anything is stepped.

    Raises:
        TypeError: ``actions`` is a string, bytes or not a sequence (a generator would be used up).
        ValueError: not ``num_envs`` actions.
    """
    if isinstance(actions, str | bytes) or not isinstance(actions, Sequence | np.ndarray):
        raise TypeError(
            f"actions must be a sequence of {num_envs} actions (one per member), got {type(actions).__name__}"
        )
    actions = list(actions)
    if len(actions) != num_envs:
        raise ValueError(f"expected {num_envs} actions (one per member), got {len(actions)}")
    return actions


def _worker_main(conn: Connection, entry_point: str, kwargs: dict[str, Any], count: int) -> None:
    envs: list[gym.Env] = []
    try:
        factory = load_entry_point(entry_point)
        envs = [factory(**kwargs) for _ in range(count)]
        conn.send(("__ready__", None))
        while True:
            cmd, payload = conn.recv()
            if cmd == "close":
                break
            conn.send(handle_request(envs, cmd, payload))
    except (EOFError, KeyboardInterrupt):
        pass
    except Exception:
        try:
            conn.send(("__error__", traceback.format_exc()))
        except Exception:
            pass
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:
                pass
        conn.close()


class _Worker:
    """A process holding members ``lo .. hi-1``."""

    def __init__(self, ctx: Any, entry_point: str, kwargs: dict[str, Any], lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker_main, args=(child, entry_point, kwargs, hi - lo), daemon=True
        )
        self.process.start()
        child.close()

    def wait_ready(self, timeout: float | None) -> None:
        """Wait for the worker to have built its members.

        Raises:
            WorkerStartError: the process died, sent a traceback, or did not answer within ``timeout``.
        """
        what = f"the worker process for members {self.lo}..{self.hi - 1}"
        hint = (
            "under the 'spawn' start method the script that builds the env must guard its entry point "
            "with `if __name__ == \"__main__\":`, and the member entry point must be importable"
        )
        try:
            if timeout is not None and not self.conn.poll(timeout):
                raise WorkerStartError(f"{what} did not start within {timeout}s; {hint}")
            reply = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.process.join(timeout=5)
            self.kill()
            raise WorkerStartError(
                f"{what} exited before it was ready (exit code {self.process.exitcode}, "
                f"{type(exc).__name__}); {hint}"
            ) from None
        except WorkerStartError:
            self.kill()
            raise
        if not (isinstance(reply, tuple) and reply and reply[0] == "__ready__"):
            self.kill()
            detail = reply[1] if isinstance(reply, tuple) and len(reply) > 1 else repr(reply)
            raise WorkerStartError(f"{what} could not build its members:\n{detail}")

    def send(self, cmd: str, payload: Any) -> None:
        """Send one request (its answer is read by :meth:`receive`)."""
        self.conn.send((cmd, payload))

    def receive(self, timeout: float | None) -> Any:
        """The answer to the request sent last."""
        if timeout is not None and not self.conn.poll(timeout):
            raise TimeoutError(f"worker for members {self.lo}..{self.hi - 1} did not answer in {timeout}s")
        reply = self.conn.recv()
        if isinstance(reply, tuple) and reply and reply[0] == "__error__":
            raise RuntimeError(reply[1])
        return reply

    def request(self, cmd: str, payload: Any, timeout: float | None) -> Any:
        """Send one request and wait for its answer."""
        self.send(cmd, payload)
        return self.receive(timeout)

    def shutdown(self) -> None:
        """Ask the worker to close its members, then end the process."""
        try:
            self.conn.send(("close", None))
        except (OSError, BrokenPipeError):
            pass
        self.process.join(timeout=5)
        self.kill()

    def kill(self) -> None:
        try:
            self.conn.close()
        finally:
            if self.process.is_alive():
                self.process.kill()
            self.process.join(timeout=5)


_WORKER_FAILURES = (EOFError, OSError, BrokenPipeError, TimeoutError, RuntimeError)


class _DeadWorker:
    """Stands in for a worker whose replacement could not start: every request fails at once, as a dead
    worker's does (so the group env crashes its members and tries to start a worker again)."""

    def __init__(self, lo: int, hi: int, reason: str) -> None:
        self.lo, self.hi, self.reason = lo, hi, reason

    def send(self, cmd: str, payload: Any) -> None:
        raise RuntimeError(f"no worker for members {self.lo}..{self.hi - 1} (its replacement could not start: "
                           f"{self.reason})")

    def receive(self, timeout: float | None) -> Any:
        self.send("", None)

    def wait_ready(self, timeout: float | None) -> None:
        """Nothing to wait for."""

    def shutdown(self) -> None:
        """Nothing to end."""

    def kill(self) -> None:
        """Nothing to end."""


class GroupVectorEnv(VectorEnv):
    """A Gymnasium ``VectorEnv`` of task groups (see the module docstring).

    Args:
        member_entry_point: ``"module:Class"`` of the member env, or a callable returning one.
        num_envs: total members, a multiple of ``group_size``.
        group_size: N, members per group.
        num_workers: 0 runs members in this process; W > 0 spreads them over W worker processes
            (needs a string entry point).
        worker_timeout: seconds to wait for a worker's answer before treating it as crashed.
        mp_context: multiprocessing start method for workers (default ``"spawn"``).
        seed: seed of the generator that draws group seeds on ``reset(seed=None)``.
        backend: where the W workers run: ``"process"`` (local worker processes) or ``"ray"`` (W Ray
            actors placed across the nodes of the Ray cluster; see :mod:`agentgym_credit.envs.ray_backend`).
        backend_options: options of the backend (for ``"ray"``: ``address``, ``num_cpus`` per actor …).
        **member_kwargs: passed to every member's constructor.
    """

    metadata = {"autoreset_mode": AutoresetMode.DISABLED, "render_modes": []}

    def __init__(
        self,
        member_entry_point: str | Callable[..., gym.Env],
        num_envs: int,
        group_size: int = 1,
        *,
        num_workers: int = 0,
        worker_timeout: float | None = 300.0,
        mp_context: str = "spawn",
        seed: int | None = None,
        backend: str = "process",
        backend_options: dict[str, Any] | None = None,
        **member_kwargs: Any,
    ) -> None:
        numbers = (("num_envs", num_envs, int), ("group_size", group_size, int),
                   ("num_workers", num_workers, int), ("worker_timeout", worker_timeout, float | None))
        for name, value, kind in numbers:
            check_type(name, value, kind)
        seed = check_seed(seed)
        check_constructor_kwargs(member_entry_point, member_kwargs)
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0 (0 runs the members in this process), "
                             f"got {num_workers}")
        if worker_timeout is not None and not worker_timeout > 0:
            raise ValueError(f"worker_timeout must be a positive number of seconds or None, "
                             f"got {worker_timeout}")
        if group_size < 1 or num_envs < 1 or num_envs % group_size:
            raise ValueError(
                f"num_envs ({num_envs}) must be a positive multiple of group_size ({group_size}); "
                "use num_envs = num_groups * group_size"
            )
        if num_workers and not isinstance(member_entry_point, str):
            raise ValueError("worker processes need a 'module:Class' string entry point")
        self.num_envs = int(num_envs)
        self.group_size = int(group_size)
        self.num_groups = self.num_envs // self.group_size
        self.member_entry_point = member_entry_point
        self.member_kwargs = dict(member_kwargs)
        self.worker_timeout = worker_timeout
        self._rng = np.random.default_rng(seed)
        self.num_workers = min(int(num_workers), self.num_envs)
        self.single_observation_space = FreeText()
        self.single_action_space = FreeText()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = None
        self.members: list[gym.Env] = []
        self._workers: list[_Worker] = []
        if backend not in ("process", "ray"):
            raise ValueError(f"backend must be 'process' or 'ray', got {backend!r}")
        if self.num_workers:
            self._ctx = mp.get_context(mp_context)
            if backend == "ray":  # imported only when asked for: ray is an optional extra
                from agentgym_credit.envs.ray_backend import RayWorkerPool

                self._new_worker = RayWorkerPool(member_entry_point, self.member_kwargs, **dict(backend_options or {}))
            bounds = np.linspace(0, self.num_envs, self.num_workers + 1).astype(int)
            self._workers = [
                self._new_worker(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
            ]
            try:
                for worker in self._workers:
                    worker.wait_ready(self.worker_timeout)
            except WorkerStartError:
                for worker in self._workers:
                    worker.kill()
                self._workers = []
                getattr(self._new_worker, "close", lambda: None)()
                raise
        else:
            factory = load_entry_point(member_entry_point)
            self.members = [factory(**self.member_kwargs) for _ in range(self.num_envs)]
        self._obs: list[Any] = [""] * self.num_envs
        self._infos: list[dict] = [{} for _ in range(self.num_envs)]
        self._finished = np.ones(self.num_envs, dtype=bool)
        self._needs_reset = np.ones(self.num_envs, dtype=bool)
        self._terminated = np.zeros(self.num_envs, dtype=bool)
        self._truncated = np.zeros(self.num_envs, dtype=bool)
        self.worker_restarts = 0

    # ------------------------------------------------------------- helpers
    def _new_worker(self, lo: int, hi: int) -> Any:
        """A worker holding members ``lo .. hi-1`` (a local process; the Ray backend replaces this)."""
        return _Worker(self._ctx, self.member_entry_point, self.member_kwargs, lo, hi)

    def group_of(self, index: int) -> int:
        """The group of member ``index``."""
        return index // self.group_size

    @property
    def finished(self) -> np.ndarray:
        """Boolean mask of members whose episode has ended."""
        return self._finished.copy()

    @property
    def crashed(self) -> np.ndarray:
        """Boolean mask of members whose episode ended in a crash (``info["crashed"]``: the member raised or
        its worker died, during a step or during another request: ``call``, ``apply``, ``snapshots``, a
        restore or another member's reset), until they are reset or restored."""
        return np.array([bool(done and info.get("crashed", False))
                         for done, info in zip(self._finished, self._infos, strict=True)], dtype=bool)

    def _vector_infos(self, indices: Sequence[int]) -> dict[str, Any]:
        """Gymnasium vector infos: ``infos[key]`` an array over members, ``infos["_" + key]`` its mask.

        Unlike ``VectorEnv._add_info`` the dtype is chosen from all members' values (a key that is an
        int for one member and ``inf`` for another becomes float; mixed types become object).
        """
        values: dict[str, dict[int, Any]] = {}
        for i in indices:
            for key, value in self._infos[i].items():
                values.setdefault(key, {})[i] = value
        infos: dict[str, Any] = {}
        for key, per_member in values.items():
            sample = list(per_member.values())
            if all(isinstance(v, bool | np.bool_) for v in sample):
                arr = np.zeros(self.num_envs, dtype=bool)
            elif all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in sample):
                arr = np.zeros(self.num_envs, dtype=np.int64)
            elif all(isinstance(v, int | float | np.integer | np.floating) for v in sample):
                arr = np.zeros(self.num_envs, dtype=np.float64)
            else:
                arr = np.empty(self.num_envs, dtype=object)
            mask = np.zeros(self.num_envs, dtype=bool)
            for i, v in per_member.items():
                arr[i] = v
                mask[i] = True
            infos[key], infos[f"_{key}"] = arr, mask
        return infos

    def _crash_member(self, i: int, info: dict[str, Any]) -> None:
        """Member ``i`` lost its live episode to a dead worker outside any request for it."""
        if not self._finished[i]:
            self._finished[i] = True
            self._truncated[i] = True
            self._infos[i] = dict(self._infos[i], **info, active=False)

    def _exchange(self, requests: dict[int, tuple[str, Any]]) -> dict[int, Any]:
        """Send every worker its request, then collect the answers: the workers work side by side.

        Args:
            requests: worker index -> ``(cmd, payload)``.

        Returns:
            worker index -> its answer, or the exception (one of ``_WORKER_FAILURES``) that its sending or
            answering raised.
        """
        answers: dict[int, Any] = {}
        for w_idx, (cmd, payload) in requests.items():
            try:
                self._workers[w_idx].send(cmd, payload)
            except _WORKER_FAILURES as exc:
                answers[w_idx] = exc
        for w_idx in requests:
            if w_idx not in answers:
                try:
                    answers[w_idx] = self._workers[w_idx].receive(self.worker_timeout)
                except _WORKER_FAILURES as exc:
                    answers[w_idx] = exc
        return answers

    def _dispatch(self, cmd: str, payload: dict[int, Any]) -> dict[int, tuple]:
        """Send per-member payloads (keyed by member index) and collect per-member results.

        Returns:
            For ``"step"``: member -> ``(obs, reward, terminated, truncated, info)`` (``obs`` None for a
            crashed member). For ``"reset"`` and ``"restore"`` (payload: the snapshot): member ->
            ``("ok", obs, info)``; for ``"snapshot"`` (payload: None): member -> ``("ok", snapshot)``; for
            all three ``("error", text)``, or ``("crashed", info)`` when its worker died (the worker is
            replaced by then).
        """
        results: dict[int, tuple] = {}
        if not self._workers:
            for i, p in payload.items():
                env = self.members[i]
                if cmd == "reset":
                    results[i] = member_reset(env, *p)
                elif cmd == "step":
                    results[i] = member_step(env, p)
                elif cmd == "snapshot":
                    results[i] = member_snapshot(env)
                else:
                    results[i] = member_restore(env, p)
            return results
        mine = {w_idx: [(i - worker.lo, p) for i, p in payload.items() if worker.lo <= i < worker.hi]
                for w_idx, worker in enumerate(self._workers)}
        requests = {w_idx: (cmd, [(j, *p) for j, p in m] if cmd == "reset" else m)
                    for w_idx, m in mine.items() if m}
        for w_idx, answer in self._exchange(requests).items():
            worker = self._workers[w_idx]
            if not isinstance(answer, BaseException):
                for j, *res in answer:
                    results[worker.lo + j] = tuple(res)
                continue
            err = error_text(answer).strip()
            fate = self._replace_worker(w_idx)
            crash = {"crashed": True, "worker_error": f"worker for members {worker.lo}..{worker.hi - 1} "
                                                      f"died and {fate} ({err})"}
            for j, _ in mine[w_idx]:
                results[worker.lo + j] = ((None, 0.0, False, True, crash) if cmd == "step"
                                          else ("crashed", crash))
            # the replacement's members have no episode; those not in this request lost theirs silently
            for i in range(worker.lo, worker.hi):
                self._needs_reset[i] = True
                if i not in payload:
                    self._crash_member(i, crash)
        return results

    def _replace_worker(self, w_idx: int) -> str:
        """Replace the dead worker ``w_idx``; returns what became of it (``"was replaced"``, or ``"could not be
        restarted: …"`` when the replacement could not start: a stand-in then answers every request for its
        members as a dead worker, and the next request tries to start one again)."""
        old = self._workers[w_idx]
        old.kill()
        new = self._new_worker(old.lo, old.hi)
        try:
            new.wait_ready(self.worker_timeout)
        except WorkerStartError as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            reason = lines[0] if len(lines) < 2 else f"{lines[0].rstrip(':')}: {lines[-1]}"
            self._workers[w_idx] = _DeadWorker(old.lo, old.hi, reason)
            return f"could not be restarted: {reason}"
        self._workers[w_idx] = new
        self.worker_restarts += 1
        return "was replaced"

    def _check_open(self) -> None:
        if getattr(self, "closed", False):
            raise EnvClosedError(f"{type(self).__name__} was closed; build a new env")

    # ----------------------------------------------------------------- API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Reset all members, or those in ``options["reset_mask"]``.

        Args:
            seed: int (member i gets ``seed + i // group_size``), a sequence of per-group seeds, or None.
            options: passed to members; ``reset_mask`` (bool array of ``num_envs``) selects members;
                ``group_options`` (a sequence of one mapping, or None, per group) adds each group's own
                options (``{"game_index": 3}``: one reset starts a different task in every group, and the
                workers reset their members side by side); ``group_id`` is set here (member i is in group
                ``i // group_size``).

        Raises:
            ResetError: some members' resets raised (every selected member is then left needing reset).
            TypeError, ValueError: malformed ``seed``, ``options`` (also: options that cannot be pickled,
                with or without workers) or ``reset_mask``; raised before any member is touched.
            EnvClosedError: the env was closed.
        """
        self._check_open()
        options = check_reset_options(options)
        mask = self._reset_mask(options.pop("reset_mask", None))
        per_group = self._group_options(options.pop("group_options", None))
        if not picklable((options, per_group)):  # checked with and without workers, so both behave the same
            raise TypeError(
                f"reset options must be picklable (members in worker processes receive a copy): {brief_repr(options)}"
            )
        group_seeds = self._group_seeds(seed)
        payload = {
            int(i): (group_seeds[self.group_of(int(i))],
                     dict(options, **per_group[self.group_of(int(i))], group_id=self.group_of(int(i))))
            for i in np.flatnonzero(mask)
        }
        results = self._dispatch("reset", payload)
        retry = {i: payload[i] for i, res in results.items() if res[0] == "crashed"}
        if retry:  # the replacement worker gets one more try
            results.update(self._dispatch("reset", retry))
        errors = {i: res[1] if res[0] == "error" else str(res[1].get("worker_error"))
                  for i, res in results.items() if res[0] != "ok"}
        if errors:
            for i in payload:
                self._finished[i] = self._needs_reset[i] = True
                self._terminated[i] = self._truncated[i] = False
                self._infos[i] = {"active": False, "reset_error": errors.get(i, "another member's reset failed")}
            first = min(errors)
            raise ResetError(
                f"reset failed for {len(errors)} of {len(payload)} members (first: member {first}: "
                f"{errors[first]}); every member of this reset needs a new reset()",
                errors,
            )
        for i, (_, obs, info) in results.items():
            self._obs[i], self._infos[i] = obs, dict(info, active=True)
            self._finished[i] = self._needs_reset[i] = False
            self._terminated[i] = self._truncated[i] = False
        return tuple(self._obs), self._vector_infos(range(self.num_envs))

    def _group_options(self, per_group: Any) -> list[dict[str, Any]]:
        """``options["group_options"]`` as one checked dict per group (empty where not given)."""
        if per_group is None:
            return [{} for _ in range(self.num_groups)]
        if isinstance(per_group, str | bytes | Mapping) or not isinstance(per_group, Sequence):
            raise TypeError(f"options['group_options'] must be a sequence of one mapping (or None) per "
                            f"group, got {type(per_group).__name__}")
        if len(per_group) != self.num_groups:
            raise ValueError(f"options['group_options'] must hold one entry per group ({self.num_groups}), "
                             f"got {len(per_group)}")
        out = []
        for g, extra in enumerate(per_group):
            extra = check_reset_options(extra)
            if "reset_mask" in extra or "group_options" in extra or "group_id" in extra:
                raise ValueError(f"options['group_options'][{g}] cannot set reset_mask, group_options or "
                                 "group_id")
            out.append(extra)
        return out

    def _reset_mask(self, mask: Any) -> np.ndarray:
        if mask is None:
            return np.ones(self.num_envs, dtype=bool)
        arr = np.asarray(mask)
        if arr.shape != (self.num_envs,):
            raise ValueError(f"reset_mask must have shape ({self.num_envs},), got {arr.shape}")
        if arr.dtype.kind not in "biu" or (arr.dtype.kind in "iu" and not np.all((arr == 0) | (arr == 1))):
            raise TypeError(f"reset_mask must hold booleans, got dtype {arr.dtype}")
        return arr.astype(bool)

    def _group_seeds(self, seed: Any) -> list[int | None]:
        if seed is None:
            return [int(s) for s in self._rng.integers(0, 2**31 - 1, size=self.num_groups)]
        if isinstance(seed, int | np.integer | bool | np.bool_ | float | np.floating):
            base = check_seed(seed)
            self._rng = np.random.default_rng(base)
            return [base + g for g in range(self.num_groups)]
        if isinstance(seed, str | bytes) or not isinstance(seed, Sequence | np.ndarray):
            raise TypeError(
                f"seed must be an int, a sequence of one seed per group, or None; got {type(seed).__name__}"
            )
        seeds = [check_seed(s, f"seed[{g}]") for g, s in enumerate(seed)]
        if len(seeds) != self.num_groups:
            raise ValueError(f"seed sequence must have one seed per group ({self.num_groups}), got {len(seeds)}")
        return seeds

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every active member; finished members are no-ops (reward 0, ``active=False``).

        Raises:
            ResetNeeded: no member has a live episode (before the first reset, or after a failed one).
            ValueError, TypeError: not one action per member.
            EnvClosedError: the env was closed.
        """
        self._check_open()
        actions = member_actions(actions, self.num_envs)
        if self._needs_reset.all():
            raise ResetNeeded("no member of the group vector env has a live episode; call reset() first")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        active = np.flatnonzero(~self._finished)
        results = self._dispatch("step", {int(i): as_text_action(actions[i]) for i in active})
        for i, (obs, reward, terminated, truncated, info) in results.items():
            if obs is not None:
                self._obs[i] = obs
            else:
                info = dict(self._infos[i], **info)
            rewards[i] = reward
            self._terminated[i], self._truncated[i] = terminated, truncated
            self._finished[i] = terminated or truncated
            self._infos[i] = dict(info, active=True)
        for i in np.flatnonzero(self._finished):
            if int(i) not in results:
                self._infos[i] = dict(self._infos[i], active=False)
        return (
            tuple(self._obs),
            rewards,
            self._terminated.copy(),
            self._truncated.copy(),
            self._vector_infos(range(self.num_envs)),
        )

    def branch(self, parent: int, children: Sequence[int]) -> tuple[list[str], dict[str, Any]]:
        """Fork live member ``parent`` into ``children``: each child takes the parent's exact current state.

        The parent's snapshot (:meth:`~agentgym_credit.envs.base.GroupMemberEnv.snapshot`) is restored into
        every child, wherever it runs (in this process, another worker process or another Ray actor: the
        snapshot travels pickled). A child's earlier episode, live or not, is replaced. Afterwards the
        children are live members like the parent (not finished, ``info["active"] = True``) and step
        independently of it and of each other; the parent is unchanged. (:meth:`snapshot` and
        :meth:`restore` do the same in two calls, to fork a state the parent has since left.)

        Args:
            parent: the member to fork; it must have a live episode (reset, not finished).
            children: other members of the parent's task group, each named once.

        Returns:
            The children's observations (in the order of ``children``: the parent's last observation) and
            their infos as Gymnasium vector infos, like ``reset`` and ``step`` return them: ``infos[key]``
            an array over all ``num_envs`` members whose mask ``infos["_" + key]`` is set for the children
            only (each child's entries are the parent's last info).

        Raises:
            TypeError: ``parent`` or a child is not an integer, or ``children`` is not a sequence.
            ValueError: a member out of range, ``children`` empty or naming a member twice or the parent, a
                child outside the parent's group, or a parent that was not reset or whose episode is over.
                Raised before any member is touched.
            RuntimeError: the parent's snapshot or a child's restore failed (a child whose restore failed
                is left as it was; one whose worker died needs a reset), or a worker died.
            EnvClosedError: the env was closed.
        """
        self._check_open()
        parent = self._member_index(parent, "parent")
        kids = self._member_indices(children, "children", self.group_of(parent))
        if parent in kids:
            raise ValueError(f"branch: member {parent} is both the parent and a child; children must be other members")
        if self._needs_reset[parent]:
            raise ValueError(f"branch: parent {parent} has no episode (it was not reset, or its reset failed); "
                             "reset() it first")
        if self._finished[parent]:
            raise ValueError(f"branch: parent {parent}'s episode is over; branch a live member")
        snapshot = self.snapshot(parent)
        failed = self._restore_into(kids, snapshot)
        if failed:
            first = min(failed)
            raise RuntimeError(
                f"branch: restoring member {parent}'s snapshot failed for {len(failed)} of {len(kids)} children "
                f"(first: member {first}: {failed[first]})"
            )
        return [self._obs[c] for c in kids], self._vector_infos(kids)

    def snapshot(self, member: int) -> MemberSnapshot:
        """Member ``member``'s :class:`~agentgym_credit.envs.fork.MemberSnapshot`, to :meth:`restore` later.

        With workers the snapshot comes from the member's process, pickled. A snapshot of an ended episode
        is allowed (restored, the members are finished).

        Raises:
            TypeError, ValueError: ``member`` is not a member index, or has no episode (not reset, its reset
                failed, or its worker died).
            RuntimeError: the member's ``snapshot()`` raised (e.g. after a ``step()`` that raised), or its
                worker died.
            EnvClosedError: the env was closed.
        """
        return self.snapshots([member])[0]

    def snapshots(self, members: Sequence[int]) -> list[MemberSnapshot]:
        """The snapshots of several members, like :meth:`snapshot` but in one request per worker (a tree
        rollout keeps a node after every step of every member).

        Raises:
            TypeError, ValueError: a member is not a member index, is named twice, or has no episode.
            RuntimeError: a member's ``snapshot()`` raised or its worker died (the first such member is named).
            EnvClosedError: the env was closed.
        """
        self._check_open()
        if isinstance(members, str | bytes) or not isinstance(members, Sequence | np.ndarray):
            raise TypeError(f"members must be a sequence of member indices, got {type(members).__name__}")
        wanted = [self._member_index(m, "member") for m in members]
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"members {sorted(wanted)} name a member more than once; name each member once")
        for i in wanted:
            if self._needs_reset[i]:
                raise ValueError(f"member {i} has no episode (it was not reset, or its reset failed); reset() it first")
        taken = self._dispatch("snapshot", {i: None for i in wanted})
        failed = [i for i in wanted if taken[i][0] != "ok"]
        for i in failed:
            if taken[i][0] == "crashed":
                self._needs_reset[i] = True
                self._crash_member(i, taken[i][1])
        if failed:
            i = failed[0]
            detail = taken[i][1] if taken[i][0] == "error" else taken[i][1].get("worker_error")
            raise RuntimeError(f"member {i}'s snapshot failed ({detail}); no member was changed")
        return [taken[i][1] for i in wanted]

    def restore(self, members: Sequence[int], snapshot: MemberSnapshot) -> tuple[list[str], dict[str, Any]]:
        """Put ``members`` (of the snapshot's task group) in the state of ``snapshot``, e.g. one :meth:`snapshot`
        took of a member earlier in its episode.

        Each member's earlier episode is replaced; the members are live afterwards unless the snapshot was
        taken after its episode ended.

        Returns:
            The members' observations and vector infos, as :meth:`branch` returns them.

        Raises:
            TypeError: ``snapshot`` is not a ``MemberSnapshot``, or a member is not an integer.
            ValueError: members out of range, empty or named twice, outside the snapshot's group (checked
                before any member is touched), or a member's ``restore`` refused the snapshot (that member
                is left as it was; the others were restored: :meth:`restore_each` says which).
            RuntimeError: a worker died (its members need a reset).
            EnvClosedError: the env was closed.
        """
        restored, obs, infos, failed = self.restore_each(members, snapshot)
        if failed:
            raise restore_failure(failed, len(restored) + len(failed))
        return obs, infos

    def restore_each(
        self, members: Sequence[int], snapshot: MemberSnapshot
    ) -> tuple[list[int], list[str], dict[str, Any], dict[int, str]]:
        """:meth:`restore`, reporting the members whose restore failed instead of raising for them (a wrapper
        stack forks the members that were restored and then raises: :func:`restore_failure`).

        Returns:
            The members restored (in the order of ``members``), their observations, their vector infos, and
            member -> error text for each member whose restore failed.

        Raises:
            TypeError, ValueError, EnvClosedError: as :meth:`restore`, before any member is touched.
        """
        self._check_open()
        if not isinstance(snapshot, MemberSnapshot):
            raise TypeError(f"restore takes a MemberSnapshot from snapshot(), got {type(snapshot).__name__}")
        kids = self._member_indices(members, "members", snapshot.group_id)
        failed = self._restore_into(kids, snapshot)
        restored = [c for c in kids if c not in failed]
        return restored, [self._obs[c] for c in restored], self._vector_infos(restored), failed

    def _restore_into(self, kids: list[int], snapshot: MemberSnapshot) -> dict[int, str]:
        """Restore ``snapshot`` into ``kids`` and update their bookkeeping; returns member -> error text."""
        results = self._dispatch("restore", {c: snapshot for c in kids})
        failed: dict[int, str] = {}
        for c in kids:
            res = results[c]
            if res[0] == "ok":
                self._obs[c], self._infos[c] = res[1], dict(res[2], active=not snapshot.finished)
                self._finished[c], self._needs_reset[c] = snapshot.finished, False
                self._terminated[c], self._truncated[c] = snapshot.terminated, snapshot.truncated
            elif res[0] == "crashed":
                self._needs_reset[c] = self._finished[c] = True
                self._terminated[c], self._truncated[c] = False, True
                self._infos[c] = dict(self._infos[c], **res[1], active=False)
                failed[c] = str(res[1].get("worker_error"))
            else:
                failed[c] = res[1]
        return failed

    def _member_index(self, value: Any, what: str) -> int:
        """``value`` as a member index, or a ``TypeError`` / ``ValueError`` naming it as ``what``."""
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            raise TypeError(f"{what} must be a member index (int), got {type(value).__name__}")
        if not 0 <= int(value) < self.num_envs:
            raise ValueError(f"{what} {int(value)} is out of range; members are 0..{self.num_envs - 1}")
        return int(value)

    def _member_indices(self, values: Any, what: str, group: int) -> list[int]:
        """``values`` as distinct member indices of task group ``group`` (errors name them as ``what``)."""
        if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
            raise TypeError(f"{what} must be a sequence of member indices, got {type(values).__name__}")
        kids = [self._member_index(v, f"{what} member") for v in values]
        if not kids:
            raise ValueError(f"{what} is empty; name at least one member of group {group}")
        if len(set(kids)) != len(kids):
            twice = sorted({c for c in kids if kids.count(c) > 1})
            raise ValueError(f"{what} name members {twice} more than once; name each member once")
        outside = [c for c in kids if self.group_of(c) != group]
        if outside:
            lo = group * self.group_size
            raise ValueError(
                f"{what} {outside} are not in task group {group} (members {lo}..{lo + self.group_size - 1})"
            )
        return kids

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method (or read an attribute) of every member's unwrapped env.

        Raises:
            Exception: the first failing member's own exception (e.g. ``AttributeError``), with or without
                workers.
            RuntimeError: a worker died during the call (it is replaced and its members need a reset).
        """
        self._check_open()
        if not picklable((name, args, kwargs)):  # checked with and without workers, so both behave the same
            raise TypeError(f"call arguments must be picklable (worker processes receive a copy): {brief_repr(args)}")
        if not self._workers:
            answers = [member_call(env, name, args, kwargs) for env in self.members]
        else:
            replies = self._collect({w: ("call", (name, args, kwargs)) for w in range(len(self._workers))},
                                    f"call({name!r})")
            answers = [tuple(res) for w in sorted(replies) for _, *res in replies[w]]
        for status, value in answers:
            if status == "error":
                raise value
        return tuple(value for _, value in answers)

    def apply(self, fn: Callable[..., Any], args: dict[int, tuple[Any, ...]]) -> dict[int, Any]:
        """Run ``fn(member, *args[i])`` for each listed member ``i`` where the member lives (its unwrapped
        env, in this process or in its worker, the workers side by side).

        ``fn`` and the arguments must be picklable (a module-level function: a worker imports it by name).

        Args:
            fn: the function.
            args: member index -> the further arguments of its call.

        Returns:
            member index -> what ``fn`` returned.

        Raises:
            Exception: the first failing member's own exception, with or without workers.
            RuntimeError: a worker died during the call (it is replaced and its members need a reset).
        """
        self._check_open()
        if not picklable((fn, args)):  # checked with and without workers, so both behave the same
            raise TypeError(f"apply's function and arguments must be picklable (worker processes receive a "
                            f"copy): {brief_repr(fn)}")
        if not self._workers:
            answers = {i: member_apply(self.members[i], fn, a) for i, a in args.items()}
        else:
            requests = {}
            for w_idx, worker in enumerate(self._workers):
                mine = [(i - worker.lo, a) for i, a in args.items() if worker.lo <= i < worker.hi]
                if mine:
                    requests[w_idx] = ("apply", (fn, mine))
            replies = self._collect(requests, f"apply({getattr(fn, '__name__', fn)!r})")
            answers = {self._workers[w].lo + j: tuple(res)
                       for w, reply in replies.items() for j, *res in reply}
        for i in sorted(answers):
            if answers[i][0] == "error":
                raise answers[i][1]
        return {i: value for i, (_, value) in answers.items()}

    def _collect(self, requests: dict[int, tuple[str, Any]], what: str) -> dict[int, Any]:
        """The workers' answers to ``requests``; a worker that died is replaced, its members are left needing
        a reset, and ``RuntimeError`` is raised."""
        replies = self._exchange(requests)
        failed = [w for w, answer in replies.items() if isinstance(answer, BaseException)]
        fates = {}
        for w_idx in failed:
            worker = self._workers[w_idx]
            fates[w_idx] = self._replace_worker(w_idx)
            crash = {"crashed": True, "worker_error": f"worker for members {worker.lo}..{worker.hi - 1} "
                                                      f"died during {what} and {fates[w_idx]}"}
            for i in range(worker.lo, worker.hi):
                self._crash_member(i, crash)
                self._needs_reset[i] = True
        if failed:
            first = self._workers[failed[0]]
            raise RuntimeError(f"worker for members {first.lo}..{first.hi - 1} died during {what} and "
                               f"{fates[failed[0]]} ({error_text(replies[failed[0]]).strip()})")
        return replies

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.members:
            env.close()
        for worker in self._workers:
            worker.shutdown()
        self._workers = []
        getattr(self._new_worker, "close", lambda: None)()


def restore_failure(failed: dict[int, str], count: int) -> Exception:
    """The error of a restore into ``count`` members that failed for ``failed`` (member -> error text): a
    ``RuntimeError`` when a worker died, else a ``ValueError`` (a member refused the snapshot)."""
    first = min(failed)
    error = RuntimeError if any(" died and " in text for text in failed.values()) else ValueError
    return error(f"restore failed for {len(failed)} of {count} members (first: member {first}: {failed[first]})")


def make_group_vector_env(
    num_envs: int,
    member_entry_point: str,
    group_size: int = 1,
    max_episode_steps: int | None = None,
    **kwargs: Any,
) -> GroupVectorEnv:
    """The ``vector_entry_point`` behind ``gym.make_vec(id, num_envs, vectorization_mode="vector_entry_point")``.

    Args:
        num_envs: total members (G × N).
        member_entry_point: the registered member's ``"module:Class"``.
        group_size: N.
        max_episode_steps: forwarded to members as ``max_steps`` when given.
        **kwargs: ``num_workers``, ``worker_timeout``, ``mp_context``, ``seed`` and member kwargs.
    """
    if max_episode_steps is not None:
        kwargs.setdefault("max_steps", max_episode_steps)
    return GroupVectorEnv(member_entry_point, num_envs, group_size, **kwargs)


def group_env_options() -> tuple[str, ...]:
    """The keyword arguments of ``gym.make_vec`` that the group env takes itself (``num_workers`` …); the
    others go to every member."""
    params = inspect.signature(GroupVectorEnv.__init__).parameters
    return tuple(n for n, p in params.items() if p.kind is p.KEYWORD_ONLY)


def check_group_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Check ``gym.make_vec(env_id, …)``'s keyword arguments before anything is built: the group env's own
    (:func:`group_env_options`) against its signature, the others against the member's constructor.

    Raises:
        TypeError: an argument neither takes, or a value of the wrong type (one line naming it).
    """
    own = set(group_env_options())
    check_constructor_kwargs(GroupVectorEnv, {k: v for k, v in kwargs.items() if k in own})
    check_constructor_kwargs(gym.spec(env_id).entry_point, {k: v for k, v in kwargs.items() if k not in own})
