"""Ray backend of the group vector env: W Ray actors, each holding a contiguous slice of members.

``gym.make_vec(id, num_envs=G*N, group_size=N, vectorization_mode="vector_entry_point",
backend="ray", num_workers=W)`` builds W actors (never one per member), spread over the nodes of the
Ray cluster (``scheduling_strategy="SPREAD"``). Actor k holds members ``lo_k .. hi_k-1`` for its whole
life and builds them once, so engines that compile games or build search indexes do it once per
actor and keep it across resets — like the local worker processes, with which the Ray backend shares
every rule of :mod:`agentgym_credit.envs.group_vector` (seeding, crash reports, replacement) and answer
requests with the same code (:mod:`agentgym_credit.envs.workers`).

Which cluster: if Ray is already initialized in this process, that one; otherwise ``ray.init(address=...)``
with ``backend_options["address"]`` (``"auto"`` or ``"host:port"`` of a running cluster; ``None`` starts a
local one, which the env shuts down again on ``close()``).

``branch(parent, children)`` asks the parent's actor for its snapshot (it comes back to the driver through
the object store, pickled) and sends it to the actors of the children, which restore it
(:mod:`agentgym_credit.envs.fork`).

A dead actor (its node lost, its process killed, a member that took the process down) is reported
like a dead worker process — its members' episodes end with ``truncated=True``, ``info["crashed"] =
True`` and ``info["worker_error"]`` — and replaced by a fresh actor on any live node. ``close()`` kills
every actor the env created.

``backend_options``:
    address: cluster address for ``ray.init`` (default: the running cluster, else a local one).
    num_cpus: CPUs reserved per actor (default 1; fractions allowed).
    init_kwargs: extra ``ray.init`` keyword arguments when the env starts Ray (e.g. ``num_cpus``).
    actor_options: extra ``.options(...)`` for each actor (e.g. ``resources``, a node-affinity strategy).
"""

from __future__ import annotations

from typing import Any

from agentgym_credit.envs.workers import handle_request, load_entry_point
from agentgym_credit.errors import WorkerStartError

__all__ = ["RayWorkerPool", "RayWorker", "MemberSlice"]


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("backend='ray' needs Ray: pip install 'agentgym-credit[ray]'") from exc
    return ray


class MemberSlice:
    """The body of one Ray actor: members ``lo .. hi-1`` built once and kept.

    Its replies are those of a local worker process (:func:`~agentgym_credit.envs.workers.handle_request`,
    the same handling of values that cannot be sent back), so the group vector env treats both alike.
    """

    def __init__(self, entry_point: str, kwargs: dict[str, Any], count: int) -> None:
        factory = load_entry_point(entry_point)
        self.envs = [factory(**kwargs) for _ in range(count)]

    def ready(self) -> dict[str, Any]:
        """Where the actor runs: its node id, node IP and process id."""
        import os

        ray = _ray()
        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def handle(self, cmd: str, payload: Any) -> list[tuple]:
        """One ``reset`` / ``step`` / ``call`` / ``apply`` request for this slice (member indices local to
        it)."""
        return handle_request(self.envs, cmd, payload)

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass


class RayWorker:
    """The group env's handle on one actor (the interface of a local worker process)."""

    def __init__(self, actor: Any, lo: int, hi: int) -> None:
        self.actor, self.lo, self.hi = actor, lo, hi
        self.placement: dict[str, Any] = {}
        self._pending: Any = None

    def wait_ready(self, timeout: float | None) -> None:
        """Wait until the actor has built its members; record where it runs (:attr:`placement`).

        Raises:
            WorkerStartError: the actor failed to build its members or was not placed within ``timeout``.
        """
        ray = _ray()
        try:
            self.placement = ray.get(self.actor.ready.remote(), timeout=timeout)
        except Exception as exc:
            self.kill()
            raise WorkerStartError(
                f"the Ray actor for members {self.lo}..{self.hi - 1} did not start "
                f"({type(exc).__name__}: {str(exc)[:2000]}); check that the cluster has the CPUs asked for "
                "(backend_options num_cpus) and that every node can import agentgym_credit"
            ) from None

    def send(self, cmd: str, payload: Any) -> None:
        """Send one request (its answer is read by :meth:`receive`; the actors of a group env work side by
        side)."""
        self._pending = self.actor.handle.remote(cmd, payload)

    def request(self, cmd: str, payload: Any, timeout: float | None) -> Any:
        """Send one request and wait for the reply (:meth:`send`, then :meth:`receive`)."""
        self.send(cmd, payload)
        return self.receive(timeout)

    def receive(self, timeout: float | None) -> Any:
        """The reply to the request sent last.

        Raises:
            TimeoutError: no reply within ``timeout``.
            RuntimeError: the actor died (node lost, process killed) or raised.
        """
        ray = _ray()
        try:
            return ray.get(self._pending, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"Ray actor for members {self.lo}..{self.hi - 1} did not answer in {timeout}s") from None
        except ray.exceptions.RayError as exc:
            raise RuntimeError(f"Ray actor for members {self.lo}..{self.hi - 1} failed: {type(exc).__name__}") from None

    def shutdown(self) -> None:
        """Close the members, then end the actor."""
        ray = _ray()
        try:
            ray.get(self.actor.close.remote(), timeout=5)
        except Exception:
            pass
        self.kill()

    def kill(self) -> None:
        """End the actor (no restart)."""
        try:
            _ray().kill(self.actor, no_restart=True)
        except Exception:
            pass


class RayWorkerPool:
    """Creates the actors of one group env (callable as ``pool(lo, hi) -> RayWorker``).

    Args:
        entry_point: the member's ``"module:Class"``.
        member_kwargs: the members' constructor arguments.
        address: ``ray.init`` address when Ray is not initialized yet (see the module docstring).
        num_cpus: CPUs reserved per actor.
        init_kwargs: extra ``ray.init`` arguments when this pool starts Ray.
        actor_options: extra actor ``.options(...)``.
    """

    def __init__(
        self,
        entry_point: str,
        member_kwargs: dict[str, Any],
        *,
        address: str | None = None,
        num_cpus: float = 1.0,
        init_kwargs: dict[str, Any] | None = None,
        actor_options: dict[str, Any] | None = None,
    ) -> None:
        ray = _ray()
        self.started_ray = False
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False, **dict(init_kwargs or {}))
            self.started_ray = True
        self.entry_point = entry_point
        self.member_kwargs = dict(member_kwargs)
        options: dict[str, Any] = {"num_cpus": float(num_cpus), "scheduling_strategy": "SPREAD", "max_restarts": 0}
        options.update(actor_options or {})
        self._actor_cls = ray.remote(MemberSlice).options(**options)
        self.workers: list[RayWorker] = []

    def __call__(self, lo: int, hi: int) -> RayWorker:
        worker = RayWorker(self._actor_cls.remote(self.entry_point, self.member_kwargs, hi - lo), lo, hi)
        self.workers.append(worker)
        return worker

    def close(self) -> None:
        """Kill every actor this pool created; shut Ray down if this pool started it."""
        for worker in self.workers:
            worker.kill()
        self.workers = []
        if self.started_ray:
            _ray().shutdown()
            self.started_ray = False
