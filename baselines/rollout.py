"""Group rollouts of an LLM policy, kept as step records (StepPO's step-native representation).

:func:`make_group_env` builds the wrapper stack ``RecordStepBatch(PromptObservations(ParseActions(
group vector env)))``: the policy sees the papers' prompt, its response is parsed into an action, and
every executed step is recorded into a :class:`~agentgym_credit.records.StepBatch`.

:func:`collect_rollout` resets all G groups (N members each, the same initial state within a group),
generates one response per active member per step until every member has finished, and returns a
:class:`Rollout`: the batch plus, for each of its rows, the prompt token ids, the response token ids and
the log-probabilities the sampler gave each response token (:math:`\\log\\pi_{old}`). The sampler's mean token
entropy of each response (:attr:`~agentgym_credit.baselines.generation.Generation.entropy`) is recorded as the
step's ``entropy`` column (EMPG's :math:`H_t`) when the sampler gives one for every response.

:func:`collect_tree_rollout` grows trees instead (:mod:`~agentgym_credit.baselines.tree_rollout`: members
forked mid-episode, Tree-GRPO's fixed schedule or ARPO's entropy-triggered one, within a budget of agent
steps): its batch is a tree batch whose shared prefix steps are single rows, so the update trains each
step once. On a tree batch the episodes are the root-to-leaf paths (:func:`episodes`): the success rate,
return and length in the statistics, and the outcomes :func:`mixed_outcome_groups` compares, are the leaves'.

Responses are sampled by a :class:`~agentgym_credit.baselines.generation.Generator`
(:mod:`~agentgym_credit.baselines.generation`: Hugging Face or vLLM). A trained policy is evaluated on held-out
tasks by :func:`agentgym_credit.evaluation.held_out` (this module's former ``evaluate``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from agentgym_credit.deprecation import moved
from agentgym_credit.envs.spec import family_of_template, template_for
from agentgym_credit.records import StepBatch
from agentgym_credit.wrappers import ParseActions, PromptObservations, RecordStepBatch

from .generation import Generation, Generator
from .tree_rollout import TreeSchedule, grow_trees

__all__ = [
    "Rollout",
    "collect_rollout",
    "collect_tree_rollout",
    "dynamic_sampling",
    "episodes",
    "make_group_env",
    "mixed_outcome_groups",
    "rollout_stats",
    "transcript",
]

_MOVED = {
    **{name: f"agentgym_credit.baselines.generation.{name}"
       for name in ("HFGenerator", "StopMatcher", "VLLMGenerator", "response_text")},
    "evaluate": "agentgym_credit.evaluation.runner.held_out",
}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)


def make_group_env(
    env_id: str,
    groups: int,
    group_size: int,
    *,
    template: str | None = None,
    history_length: int | None = None,
    penalty: float | None = None,
    include_penalty: bool | str = "return",
    **env_kwargs: Any,
) -> RecordStepBatch:
    """The recorded, prompted, parsing group env of ``groups × group_size`` members.

    Args:
        env_id: a registered group environment (``"Sokoban-Group-v0"`` …).
        groups: G, task groups per rollout.
        group_size: N, members per group.
        template: prompt template (default: the env's family's, :func:`~agentgym_credit.envs.spec.template_for`);
            its family gives the response format.
        history_length: steps shown in the prompt (None: the template's default).
        penalty: invalid-format penalty reported by :class:`ParseActions` (default: the family's, else its
            format's: 0.01 for search and 0.1 otherwise, as verl-agent's scripts set it).
        include_penalty: ``"return"``: ``reward − penalty`` recorded as the step reward; ``"row"``: the penalty
            charged to the malformed response alone (the verl-agent convention); ``False``: not recorded.
        **env_kwargs: forwarded to ``gym.make_vec`` (e.g. ``max_steps``, ``dim_room``).
    """
    import agentgym_credit  # noqa: F401  (registers the environments)

    template = template or template_for(env_id)
    family = family_of_template(template)
    vec = gym.make_vec(
        env_id, num_envs=groups * group_size, vectorization_mode="vector_entry_point", group_size=group_size,
        **env_kwargs,
    )
    penalty = family.invalid_penalty if penalty is None else penalty
    prompted = PromptObservations(ParseActions(vec, fmt=family.response_format, penalty=penalty), template,
                                  history_length=history_length)
    return RecordStepBatch(prompted, include_penalty=include_penalty)


# ----------------------------------------------------------------------------- rollouts
@dataclass
class Rollout:
    """A finished group rollout: the step batch and, per row, the token-level records.

    Attributes:
        batch: the recorded :class:`StepBatch` (one row per executed step).
        prompt_ids: per row, the prompt token ids.
        response_ids: per row, the response token ids.
        old_logprobs: per row, ``log π_old`` of each response token.
        responses: per row, the response text.
        stats: success rate, mean return, valid-action rate, mean steps, tokens, timing.
    """

    batch: StepBatch
    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    old_logprobs: list[np.ndarray]
    responses: list[str]
    stats: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.batch)

    def take_groups(self, groups: Sequence[int] | np.ndarray) -> Rollout:
        """The rows of the given group ids (in their order here), with this rollout's ``stats``."""
        rows = np.flatnonzero(np.isin(self.batch.group, np.asarray(groups, dtype=np.int64)))
        pick = rows.tolist()
        return Rollout(self.batch.take(rows), [self.prompt_ids[r] for r in pick],
                       [self.response_ids[r] for r in pick], [self.old_logprobs[r] for r in pick],
                       [self.responses[r] for r in pick], dict(self.stats))

    @classmethod
    def concat(cls, parts: Sequence[Rollout], stats: dict[str, float] | None = None) -> Rollout:
        """The rows of several rollouts of one recorder (group and trajectory ids are distinct across its
        resets), with ``stats`` (default: those of all the rows, :func:`rollout_stats`)."""
        batch = StepBatch.concat([p.batch for p in parts])
        out = cls(batch, [x for p in parts for x in p.prompt_ids], [x for p in parts for x in p.response_ids],
                  [x for p in parts for x in p.old_logprobs], [x for p in parts for x in p.responses])
        out.stats = dict(stats) if stats is not None else rollout_stats(
            out, sum(p.stats.get("rollout_s", 0.0) for p in parts))
        return out


def episodes(batch: StepBatch) -> StepBatch:
    """The batch's episodes as chains: the batch itself, or a tree batch's root-to-leaf paths
    (:meth:`~agentgym_credit.records.StepBatch.as_paths`)."""
    return batch.as_paths() if batch.is_tree else batch


def rollout_stats(rollout: Rollout, seconds: float) -> dict[str, float]:
    """Success rate, mean return, valid-action rate, mean episode length, response tokens of a rollout's rows,
    the agent steps played (``steps``: the rows) and the seconds it took (``rollout_s``). On a tree rollout the
    episodes are the root-to-leaf paths: success, return and length are theirs."""
    batch = rollout.batch
    played = episodes(batch)
    return {
        "success_rate": float(played.traj_success.mean()) if len(batch) else 0.0,
        "mean_return": float(played.traj_return.mean()) if len(batch) else 0.0,
        "valid_rate": float(batch.valid.mean()) if len(batch) else 0.0,
        "mean_steps": float(played.traj_length.mean()) if len(batch) else 0.0,
        "response_tokens": float(sum(len(r) for r in rollout.response_ids)),
        "steps": float(len(batch)),
        "rollout_s": float(seconds),
    }


def mixed_outcome_groups(batch: StepBatch) -> np.ndarray:
    """The group ids whose members did not all get the same outcome (some won, some lost): the groups with
    a non-zero success spread, which DAPO's dynamic sampling keeps (``filter_groups`` with ``metric=acc``;
    Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", arXiv:2503.14476)."""
    if len(batch) == 0:
        return np.zeros(0, dtype=np.int64)
    batch = episodes(batch)  # a tree's members are its leaves
    won = batch.traj_success.astype(np.float64)
    groups = batch.traj_group
    ids, inverse = np.unique(groups, return_inverse=True)
    wins = np.bincount(inverse, weights=won, minlength=len(ids))
    members = np.bincount(inverse, minlength=len(ids))
    return ids[(wins > 0) & (wins < members)]


def dynamic_sampling(play: Callable[[], Rollout], groups: int, max_rollouts: int) -> Rollout:
    """DAPO's dynamic sampling (``filter_groups`` with ``metric=acc``; Yu et al., "DAPO: An Open-Source LLM
    Reinforcement Learning System at Scale", arXiv:2503.14476): ``play()`` rollouts of fresh tasks until
    ``groups`` groups with mixed outcomes (:func:`mixed_outcome_groups`) are kept, the first ones in play order,
    or ``max_rollouts`` rollouts were played.

    Returns:
        The kept groups' rows; ``stats`` describe every episode played and count the ``rollouts`` played, the
        ``kept_groups`` and the ``uniform_groups`` (all won or all lost).
    """
    played: list[Rollout] = []
    kept: list[Rollout] = []
    count = uniform = 0
    while len(played) < max_rollouts and count < groups:
        out = play()
        played.append(out)
        mixed = mixed_outcome_groups(out.batch)
        uniform += groups - len(mixed)
        mixed = mixed[: groups - count]
        kept.append(out.take_groups(mixed))
        count += len(mixed)
    everything = Rollout.concat(played)
    stats = {**everything.stats, "rollouts": float(len(played)), "kept_groups": float(count),
             "uniform_groups": float(uniform)}
    return Rollout.concat(kept, stats)


def collect_rollout(env: RecordStepBatch, generator: Generator, seed: int | None = None,
                    on_step: Any = None) -> Rollout:
    """Reset every group and play until all members finished.

    Args:
        env: the stack from :func:`make_group_env` (``RecordStepBatch`` outermost).
        generator: the sampling backend.
        seed: reset seed (group g starts from seed ``seed + g``) and sampling seed.
        on_step: called as ``on_step(k, active)`` after the k-th vector step with the number of members
            that were still playing (progress bars).
    """
    start = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    base = env.unwrapped
    records: dict[tuple[int, int], Any] = {}
    steps = np.zeros(env.num_envs, dtype=np.int64)
    k = 0
    while not base.finished.all():
        active = np.flatnonzero(~base.finished)
        gens = generator.generate([obs[i] for i in active], seed=None if seed is None else seed * 100_003 + k)
        actions = [""] * env.num_envs
        entropy: np.ndarray | None = np.zeros(env.num_envs)  # members that finished: ignored by the recorder
        for i, gen in zip(active, gens, strict=True):
            actions[i] = gen.text
            records[(env.recorder.member_traj[int(i)], int(steps[i]))] = gen
            if entropy is not None and gen.entropy is not None:
                entropy[i] = gen.entropy
            else:
                entropy = None
        obs, *_ = env.step(actions, entropy=entropy)
        steps[active] += 1
        if on_step is not None:
            on_step(k, len(active))
        k += 1
    return _rollout_of(env.pop_batch(), records, start)


def collect_tree_rollout(env: RecordStepBatch, generator: Generator, schedule: TreeSchedule,
                         seed: int | None = None, on_step: Any = None) -> Rollout:
    """Reset every group and grow its trees (:func:`~agentgym_credit.baselines.tree_rollout.grow_trees`) with
    the generator's responses; the batch is a tree batch, each step one row.

    Args:
        env: the stack from :func:`make_group_env` (its ``group_size`` members per group are the slots the trees
            are played on).
        generator: the sampling backend (its ``Generation.entropy``, where it has one, is recorded and drives
            the entropy schedule).
        schedule: the :class:`~agentgym_credit.baselines.tree_rollout.TreeSchedule`.
        seed: reset seed (group g starts from seed ``seed + g``), sampling seed and the schedule's seed.
        on_step: called as ``on_step(k, playing)`` after the k-th vector step.

    Returns:
        The :class:`Rollout`; its ``stats`` add the tree statistics (``steps``, ``forks``, ``forked_members``,
        ``rounds``, ``budget_used``, ``fork_s``) to :func:`rollout_stats`.
    """
    start = time.perf_counter()
    calls = iter(range(1 << 62))

    def policy(prompts: list[Any], members: list[int], infos: list[dict[str, Any]]) -> list[Generation]:
        k = next(calls)
        return generator.generate(prompts, seed=None if seed is None else seed * 100_003 + k)

    grown = grow_trees(env, policy, schedule, seed=seed, on_step=on_step)
    out = _rollout_of(env.pop_batch(), grown.outputs, start)
    out.stats.update(grown.stats)
    return out


def _rollout_of(batch: StepBatch, records: dict[tuple[int, int], Any], start: float) -> Rollout:
    """The rollout of ``batch`` whose row ``(traj, t)`` was played by the generation ``records[(traj, t)]``."""
    rows = [records[(int(tr), int(t))] for tr, t in zip(batch.traj, batch.t, strict=True)]
    out = Rollout(batch, [g.prompt_ids for g in rows], [g.response_ids for g in rows],
                  [g.logprobs for g in rows], [g.text for g in rows])
    out.stats = rollout_stats(out, time.perf_counter() - start)
    return out


def transcript(out: Rollout, rows: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """One dict per step row (all, or ``rows``): ``group``, ``traj``, ``t``, ``observation`` (what the policy was
    prompted with, before the template), ``response`` (the sampled text), ``action`` (what the environment
    executed), ``reward``, ``valid``, the invalid-action ``penalty`` charged to the row and the episode's
    ``success``."""
    b = out.batch
    return [{"group": int(b.group[i]), "traj": int(b.traj[i]), "t": int(b.t[i]), "observation": b.state[i],
             "response": out.responses[i], "action": b.action[i], "reward": float(b.reward[i]),
             "valid": bool(b.valid[i]), "penalty": float(b.row_penalty[i]), "success": bool(b.success[i])}
            for i in (range(len(b)) if rows is None else rows)]
