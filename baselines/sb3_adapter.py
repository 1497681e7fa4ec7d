"""Train ``sb3_contrib.MaskablePPO`` (or any SB3 on-policy algorithm) on a group env with any estimator.

Two pieces make the credit estimators work inside Stable-Baselines3's own training loop:

* :class:`GroupVecEnvAdapter` — an SB3 ``VecEnv`` over a group vector env. Observations are sentence
  embeddings of each member's text (cached), actions index a fixed action vocabulary (Sokoban: the four
  moves), and ``action_masks()`` marks the admissible ones. The N members of a group start from the same
  seed; autoreset happens at group boundaries: a member that finishes reports ``done`` and then idles
  (its actions are ignored, reward 0) until every member of its group has finished, when the group is
  reset with a new seed. Every executed step is recorded into a :class:`~agentgym_credit.records.StepBatch`
  (:class:`~agentgym_credit.wrappers.RecordStepBatch`) together with its place in the rollout buffer.
* :class:`CreditCallback` — after each rollout (``on_rollout_end`` runs after SB3 computed its own GAE)
  it rebuilds the StepBatch of every group that finished, runs ``assign_credit(batch, estimator)`` and
  REPLACES the rollout buffer's advantages and returns with the estimator's at the steps' buffer slots.
  Slots with no credit (idle members, groups still running at the end of the rollout) get advantage 0
  and return = value, so they add nothing to the policy or value loss. Use ``normalize_advantage=False``
  (:func:`make_maskable_ppo` does) so that the estimator's advantages reach the loss unchanged.

For ``step_gae`` (and ``spa`` in gae mode) the ``value`` column is SB3's own critic output recorded at
each step; for ``spa`` an :class:`~agentgym_credit.baselines.progress.EmbeddingProgressEstimator` fills
``progress``.

Example:
    >>> adapter = GroupVecEnvAdapter("Sokoban-Group-v0", groups=4, group_size=4, seed=0)  # doctest: +SKIP
    >>> model, callback = make_maskable_ppo(adapter, "gigpo", n_steps=64)  # doctest: +SKIP
    >>> model.learn(20_000, callback=callback)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from agentgym_credit.credit import assign_credit
from agentgym_credit.embedding import EmbeddingCache, embedding_dimension
from agentgym_credit.records import StepBatch
from agentgym_credit.wrappers import RecordStepBatch
from agentgym_credit.wrappers.recording import member_info

from .progress import EmbeddingProgressEstimator

__all__ = ["ACTION_VOCABULARIES", "CreditCallback", "GroupVecEnvAdapter", "make_maskable_ppo", "unwrap_adapter"]

ACTION_VOCABULARIES: dict[str, tuple[str, ...]] = {"Sokoban-Group-v0": ("up", "down", "left", "right")}
"""Default action vocabulary per environment id."""


class GroupVecEnvAdapter(VecEnv):
    """An SB3 ``VecEnv`` view of a group vector env (see the module docstring).

    Args:
        env_id: a registered group environment.
        groups: G, task groups.
        group_size: N, members per group.
        actions: the action vocabulary (default :data:`ACTION_VOCABULARIES` of ``env_id``).
        obs_text: which text is embedded: ``"anchor"`` (the state key, e.g. the Sokoban board) or
            ``"observation"`` (the full observation text).
        cache: embedding cache (shared across adapters to reuse embeddings).
        seed: seed of the generator that draws group seeds.
        room_pool: if > 0, group seeds are drawn from the fixed pool ``pool_offset + 0 .. room_pool − 1``
            (a fixed training set of tasks) instead of fresh seeds.
        pool_offset: first seed of the pool.
        **env_kwargs: forwarded to ``gym.make_vec`` (e.g. ``max_steps``).
    """

    def __init__(self, env_id: str = "Sokoban-Group-v0", groups: int = 4, group_size: int = 4, *,
                 actions: Sequence[str] | None = None, obs_text: str = "anchor",
                 cache: EmbeddingCache | None = None, seed: int | None = 0, room_pool: int = 0,
                 pool_offset: int = 0, **env_kwargs: Any) -> None:
        import agentgym_credit  # noqa: F401  (registers the environments)

        if obs_text not in ("anchor", "observation"):
            raise ValueError(f"obs_text must be 'anchor' or 'observation', got {obs_text!r}")
        if actions is None:
            if env_id not in ACTION_VOCABULARIES:
                raise ValueError(f"no default action vocabulary for {env_id!r}; pass actions=[...]")
            actions = ACTION_VOCABULARIES[env_id]
        self.actions = tuple(actions)
        self.obs_text = obs_text
        self.cache = cache or EmbeddingCache()
        self.group_size = int(group_size)
        self.num_groups = int(groups)
        vec = gym.make_vec(env_id, num_envs=groups * group_size, vectorization_mode="vector_entry_point",
                           group_size=group_size, **env_kwargs)
        self.env = RecordStepBatch(vec)
        dim = embedding_dimension(self.cache.model)
        super().__init__(groups * group_size, spaces.Box(-1.0, 1.0, (dim,), np.float32),
                         spaces.Discrete(len(self.actions)))
        self._rng = np.random.default_rng(seed)
        self.room_pool, self.pool_offset = int(room_pool), int(pool_offset)
        self._texts: list[str] = [""] * self.num_envs
        self._admissible: list[list[str]] = [list(self.actions)] * self.num_envs
        self._idle = np.zeros(self.num_envs, dtype=bool)
        self._t = np.zeros(self.num_envs, dtype=np.int64)
        self._return = np.zeros(self.num_envs)
        self._actions: np.ndarray | None = None
        #: global step counter (one per ``step_wait``)
        self.steps = 0
        #: (traj id, t) → (global step, member) of every recorded step
        self.slots: dict[tuple[int, int], tuple[int, int]] = {}
        #: (global step, member) → SB3 value, filled by :class:`CreditCallback` when an estimator needs it
        self.values: dict[tuple[int, int], float] = {}
        #: per finished episode: (global step, success, return, length)
        self.episodes: list[tuple[int, bool, float, int]] = []
        self._pending = StepBatch.empty()

    # ------------------------------------------------------------------ helpers
    def _group_seeds(self) -> list[int]:
        high = self.room_pool or 2**31 - 1
        return [self.pool_offset + int(s) for s in self._rng.integers(0, high, size=self.num_groups)]

    def _absorb(self, obs: Sequence[str], infos: dict[str, Any], members: Iterable[int]) -> None:
        for i in members:
            info = member_info(infos, int(i))
            self._texts[i] = str(info.get("anchor", obs[i])) if self.obs_text == "anchor" else str(obs[i])
            self._admissible[i] = list(info.get("admissible_actions", self.actions)) or list(self.actions)

    def _observations(self) -> np.ndarray:
        return self.cache.encode(self._texts)

    def action_mask(self, i: int) -> np.ndarray:
        """Admissible actions of member ``i`` (all allowed while it idles)."""
        if self._idle[i]:
            return np.ones(len(self.actions), dtype=bool)
        allowed = set(self._admissible[i])
        mask = np.array([a in allowed for a in self.actions], dtype=bool)
        return mask if mask.any() else np.ones(len(self.actions), dtype=bool)

    def action_masks(self) -> np.ndarray:
        """``[num_envs, num_actions]`` admissible-action masks."""
        return np.stack([self.action_mask(i) for i in range(self.num_envs)])

    # ------------------------------------------------------------------ VecEnv API
    def reset(self) -> np.ndarray:
        obs, infos = self.env.reset(seed=self._group_seeds())
        self._idle[:] = False
        self._t[:] = 0
        self._return[:] = 0.0
        self._absorb(obs, infos, range(self.num_envs))
        self.reset_infos = [member_info(infos, i) for i in range(self.num_envs)]
        return self._observations()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(-1)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        assert self._actions is not None, "call step_async first"
        texts = [self.actions[int(a)] for a in self._actions]
        active = ~self._idle
        for i in np.flatnonzero(active):
            self.slots[(self.env.recorder.member_traj[int(i)], int(self._t[i]))] = (self.steps, int(i))
        obs, rewards, terminated, truncated, infos = self.env.step(texts)
        self._absorb(obs, infos, np.flatnonzero(active))
        rewards = np.where(active, rewards, 0.0).astype(np.float32)
        dones = active & (terminated | truncated)
        out_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._t[active] += 1
        self._return[active] += rewards[active]
        terminal = self._observations()
        for i in np.flatnonzero(dones):
            won = bool(member_info(infos, int(i)).get("won", False))
            out_infos[i] = {
                "terminal_observation": terminal[i],
                "TimeLimit.truncated": bool(truncated[i] and not terminated[i]),
                "is_success": won,
                "episode": {"r": float(self._return[i]), "l": int(self._t[i]), "t": float(self.steps)},
            }
            self.episodes.append((self.steps, won, float(self._return[i]), int(self._t[i])))
        self._idle |= dones
        self.steps += 1
        finished = self._idle.reshape(self.num_groups, self.group_size).all(axis=1)
        if finished.any():
            mask = np.repeat(finished, self.group_size)
            obs, infos = self.env.reset(seed=self._group_seeds(), options={"reset_mask": mask})
            members = np.flatnonzero(mask)
            self._absorb(obs, infos, members)
            self._idle[members] = False
            self._t[members] = 0
            self._return[members] = 0.0
        return self._observations(), rewards, dones, out_infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        idx = list(self._get_indices(indices))
        if attr_name == "render_mode":
            return [None] * len(idx)
        if attr_name == "action_masks":
            return [self.action_masks] * len(idx)
        members = self.env.unwrapped.members
        return [getattr(members[i].unwrapped, attr_name) for i in idx]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        members = self.env.unwrapped.members
        for i in self._get_indices(indices):
            setattr(members[i].unwrapped, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        idx = list(self._get_indices(indices))
        if method_name == "action_masks":
            return [self.action_mask(i) for i in idx]
        members = self.env.unwrapped.members
        return [getattr(members[i].unwrapped, method_name)(*method_args, **method_kwargs) for i in idx]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Reseed the generator of group seeds (applies from the next reset)."""
        self._rng = np.random.default_rng(seed)
        return [seed] * self.num_envs

    # ------------------------------------------------------------------ credit
    def pop_finished(self) -> tuple[StepBatch, np.ndarray]:
        """The trajectories of every group that finished since the last call, and each row's slot.

        Returns:
            ``(batch, slots)`` with ``slots[k] = (global step, member)`` of row k.
        """
        closed = self.env.pop_batch()
        pending = StepBatch.concat([self._pending, closed]) if len(self._pending) else closed
        running = np.isin(pending.group, sorted(self.env.recorder.open_groups()))
        batch = pending.take(np.flatnonzero(~running))
        self._pending = pending.take(np.flatnonzero(running))
        slots = np.array([self.slots.pop((int(tr), int(t))) for tr, t in zip(batch.traj, batch.t, strict=True)],
                         dtype=np.int64).reshape(-1, 2)
        return batch, slots


def unwrap_adapter(env: VecEnv) -> GroupVecEnvAdapter:
    """The :class:`GroupVecEnvAdapter` under SB3 vec-env wrappers (``VecNormalize``, ``VecMonitor`` …)."""
    while isinstance(env, VecEnvWrapper):
        env = env.venv
    if not isinstance(env, GroupVecEnvAdapter):
        raise TypeError(f"expected a GroupVecEnvAdapter (possibly wrapped), got {type(env).__name__}")
    return env


class CreditCallback(BaseCallback):
    """Replace the rollout buffer's advantages and returns by a credit estimator's.

    Args:
        estimator: a registered estimator name.
        progress: progress estimator for ``spa`` (default: an
            :class:`~agentgym_credit.baselines.progress.EmbeddingProgressEstimator` on the adapter's cache).
        verbose: SB3 verbosity.
        **params: the estimator's parameters.

    Attributes:
        last_batch: the batch credited at the last rollout end.
        last_slots: ``[rows, 2]`` (buffer position, env index) of its rows; position −1 for rows collected
            in an earlier rollout.
        last_advantages: the estimator's advantages of ``last_batch``.
    """

    def __init__(self, estimator: str = "gigpo", progress: Any = None, verbose: int = 0, **params: Any) -> None:
        super().__init__(verbose)
        self.estimator, self.params, self.progress = estimator, params, progress
        self._start = 0
        self.last_batch: StepBatch | None = None
        self.last_slots = np.zeros((0, 2), dtype=np.int64)
        self.last_advantages = np.zeros(0)

    @property
    def adapter(self) -> GroupVecEnvAdapter:
        return unwrap_adapter(self.training_env)

    @property
    def _needs_value(self) -> bool:
        name = self.estimator.lower()
        return name == "step_gae" or (name == "spa" and self.params.get("mode", "auto") == "gae")

    def _on_rollout_start(self) -> None:
        self._start = self.adapter.steps

    def _on_step(self) -> bool:
        if self._needs_value:
            values = self.locals["values"].detach().cpu().numpy().reshape(-1)
            step = self.adapter.steps - 1
            for i, v in enumerate(values):
                self.adapter.values[(step, i)] = float(v)
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        adapter = self.adapter
        batch, slots = adapter.pop_finished()
        advantages = np.zeros_like(buffer.advantages)
        returns = buffer.values.copy()
        credit_adv = np.zeros(len(batch))
        if len(batch):
            if self._needs_value:
                batch = batch.with_columns(value=[adapter.values.pop((int(s), int(m)), 0.0) for s, m in slots])
            if self.estimator.lower() == "spa":
                if self.progress is None:
                    self.progress = EmbeddingProgressEstimator(adapter.cache)
                self.progress.update(batch)
                batch = self.progress.fill(batch)
            credit = assign_credit(batch, self.estimator, **self.params)
            credit_adv = credit.advantages
            pos = slots[:, 0] - self._start
            here = (pos >= 0) & (pos < buffer.buffer_size)
            advantages[pos[here], slots[here, 1]] = credit.advantages[here]
            returns[pos[here], slots[here, 1]] = credit.returns[here]
            slots = np.stack([np.where(here, pos, -1), slots[:, 1]], axis=1)
        buffer.advantages[...] = advantages
        buffer.returns[...] = returns
        self.last_batch, self.last_slots, self.last_advantages = batch, slots, credit_adv
        stale = [k for k in adapter.values if k[0] < self._start - 4 * buffer.buffer_size]
        for k in stale:
            del adapter.values[k]


def make_maskable_ppo(env: VecEnv, estimator: str = "gigpo", *, estimator_params: dict[str, Any] | None = None,
                      progress: Any = None, seed: int = 0, **ppo_kwargs: Any) -> tuple[Any, CreditCallback]:
    """A ``MaskablePPO`` on ``env`` and the :class:`CreditCallback` to pass to ``learn``.

    Args:
        env: a :class:`GroupVecEnvAdapter`, possibly wrapped (e.g. ``VecNormalize(norm_reward=False)``).
        estimator: the credit estimator.
        estimator_params: its parameters.
        progress: progress estimator for ``spa`` (see :class:`CreditCallback`).
        seed: SB3 seed.
        **ppo_kwargs: MaskablePPO arguments (``n_steps``, ``batch_size``, ``learning_rate`` …);
            ``normalize_advantage`` is forced to False so the estimator's advantages are used unchanged.

    Raises:
        ImportError: sb3-contrib is not installed.
    """
    try:
        from sb3_contrib import MaskablePPO
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("the SB3 adapter needs sb3-contrib: `pip install agentgym-credit[train]`") from exc
    ppo_kwargs["normalize_advantage"] = False
    ppo_kwargs.setdefault("policy", "MlpPolicy")
    model = MaskablePPO(env=env, seed=seed, **ppo_kwargs)
    return model, CreditCallback(estimator, progress=progress, **(estimator_params or {}))
