"""Credit quality against ground truth on Sokoban (and ALFWorld).

Groups of Sokoban-Group-v0 (6×6, 1 box) are rolled out with an ε-noisy oracle policy for several ε.
The environment pays its default reward, gym-sokoban's shaped reward as in the papers' code (−0.1 per
step, ±1 for a box onto / off a target, +10 when solved); ``--reward sparse`` pays only 10 × solved,
the setting of this benchmark's results before the environment followed the papers' code. With shaped
rewards, returns also differ by episode length, so trajectory-level estimators (GRPO, RLOO) get a
signal from shorter solutions that the sparse reward does not give them.
Every estimator's per-step advantage is compared with the ground-truth quality of the step given by
the exact solver: ``gt = d(s) − d(s')`` with ``d`` the optimal number of moves to solve (a move that
shortens the optimal distance is good, +1; a bump into a wall is neutral, 0; one that lengthens it is
bad, −1; one into a dead end is worst, −2). Steps taken from a dead end (``d(s) = ∞``) are left out.

Metrics per estimator and ε:

* Spearman rank correlation between advantage and ``gt``;
* pairwise ranking accuracy within states: over pairs of steps from the same state of the same group
  with different ``gt``, the fraction ordered like ``gt`` (ties count half);
* sign accuracy: over steps with ``gt ≠ 0``, the fraction whose advantage has the sign of ``gt``.

``step_gae`` and ``spa`` need a critic and a progress estimator; here both come from a tabular
Monte-Carlo critic fitted on the same rollouts (V(s) = mean discounted return observed from s in its
group; progress = r + V(s') − V(s), which sums to R − V(s₀) along a trajectory as SPA's progress
estimator is trained to), so their rows measure the estimator, not a learned model (SPA's critic is the same tabular estimate
fitted to the fused-reward returns, as SPA trains its critic on them). ``spa`` runs in its
GAE mode with the same critic (the paper's PPO setting).

With ``--env alfworld`` the groups are ALFWorld games played by an ε-noisy planner oracle (the
planner's next command from the current state, a random admissible command with probability ε) and
the ground truth is ``+1`` when the executed command is the planner's next command from that state and
``−1`` otherwise (the planner returns one optimal plan, so an equally short alternative counts as −1).

``hgpo`` groups steps by their last K + 1 states (K = ``history_length``, 2 as in the HGPO recipe's
ALFWorld scripts). ``empg`` (over ``grpo`` and over ``gigpo``) reads each step's policy entropy, which an
LLM gives as its mean token entropy; the synthetic policies here give the entropy of their own action
distribution at the step's state, :math:`H(s) = -\\sum_a \\pi(a \\mid s) \\log \\pi(a \\mid s)` with
:math:`\\pi(a \\mid s) = (1 - \\varepsilon)\\, q(a \\mid s) + \\varepsilon / |A(s)|` (:func:`noisy_entropy`): on
Sokoban :math:`q` is uniform over the solver's optimal moves (all four in a dead end) and :math:`A(s)` the four
moves, so a state with several optimal moves is less certain; on ALFWorld :math:`q` is the planner's command
and :math:`A(s)` the admissible commands, so a state with more of them is less certain (a state where the
planner has no plan: uniform, :math:`\\log |A(s)|`). The entropy is what the policy knows about its own choice
before it acts, as an LLM's is: it does not depend on the action drawn.

Usage: ``agc run [--env sokoban --groups 32 --group-size 8 --epsilons 0.1 0.2 0.3 0.5 0.7 --reward shaped
--out-dir run_results]`` (about a minute on 2 cores; ``--env alfworld`` needs the ``alfworld`` extra).
Writes ``<out-dir>/credit_quality.{md,csv,png}`` (``credit_quality_sparse.*`` with ``--reward sparse``,
``credit_quality_alfworld.*`` with ``--env alfworld``); in the source checkout, ``make run`` and
``benchmarks/credit_quality.py`` write them into the benchmark's results folder.
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from scipy.stats import entropy, spearmanr
from tqdm import tqdm

from agentgym_credit.baselines.tree_rollout import TREE_SCHEDULES, TreeSchedule, grow_trees
from agentgym_credit.credit import compute_advantages
from agentgym_credit.credit.grouping import dense_ids, discounted_returns
from agentgym_credit.credit.matching import ExactMatcher
from agentgym_credit.envs.sokoban import ACTIONS, EpsilonOraclePolicy
from agentgym_credit.records import StepBatch
from agentgym_credit.wrappers import RecordStepBatch

DEFAULT_OUT = Path("run_results")
"""Where ``agc run`` writes its table, CSV and figure unless ``--out-dir`` says otherwise."""
ESTIMATORS: dict[str, dict] = {
    "grpo": {},
    "rloo": {},
    "gigpo": {"omega": 1.0, "gamma": 0.95},
    "salt": {"h": 3},
    "graphgpo": {"omega": "sokoban"},
    "step_gae": {"gamma": 0.99, "lam": 0.95},
    "spa": {"alpha": 1.0, "beta": 0.5, "gamma": 0.99, "lam": 0.95},
    # the progress signal alone, without SPA's grounding bonus (every oracle move is executable here)
    "spa β=0": {"estimator": "spa", "alpha": 1.0, "beta": 0.0, "gamma": 0.99, "lam": 0.95},
    # SPA's grounding bonus alone (β·g_t; g_t = 1 on every step here): spa's advantage is this row's + spa β=0's
    "spa α=0": {"estimator": "spa", "alpha": 0.0, "beta": 0.5, "gamma": 0.99, "lam": 0.95},
    "hgpo": {"history_length": 2, "gamma": 0.95},
    # EMPG's modulation (the paper's k = k_f = 1, ζ = 0.1) by the policy's entropy at each step
    "empg_grpo": {"estimator": "empg", "base": "grpo"},
    "empg_gigpo": {"estimator": "empg", "base": "gigpo", "omega": 1.0, "gamma": 0.95},
}
"""The rows of the table: a label and the estimator's parameters (``"estimator"`` names it where the label does
not); GraphGPO's ω preset is the environment's (:func:`estimators_for`)."""


TREE_ESTIMATORS: dict[str, dict] = {
    "grpo": {},
    "gigpo": {"omega": 1.0, "gamma": 0.95},
    "graphgpo": {"omega": "sokoban"},
    "hgpo": {},
    "tree_grpo": {},
    "tree_grpo (sum)": {"estimator": "tree_grpo", "prefix": "sum"},
}
"""The rows of ``--rollout tree``: the estimators that accept tree batches and use what trees share (GiGPO's
anchor-state groups, GraphGPO's graph, HGPO's context groups, Tree-GRPO's subtrees), with GRPO as the
baseline; each runs on the chains and on the trees (on chains ``tree_grpo`` is GRPO)."""
#: what ``CRITIC_ESTIMATORS`` read that ``evaluate`` fills from the tabular critic (chains only)
CRITIC_ESTIMATORS = ("step_gae", "spa")


def estimators_for(env: str, table: dict[str, dict] | None = None) -> dict[str, dict]:
    """``table`` (default :data:`ESTIMATORS`) with GraphGPO's ω preset for ``env`` (``"sokoban"`` or ``"alfworld"``)."""
    return {**(ESTIMATORS if table is None else table), "graphgpo": {"omega": env}}


@dataclass
class OracleStep:
    """A noisy oracle's response: the action, the entropy of the oracle's action distribution in that state
    (what the entropy tree schedule branches on) and, where the oracle knows it, the step's ground truth."""

    text: str
    entropy: float
    gt: float = float("nan")


def noisy_entropy(epsilon: float, greedy: list[str], actions: list[str]) -> float:
    """Entropy (nats, ``scipy.stats.entropy``) of the ε-noisy choice: with probability 1 − ε uniform over
    ``greedy``, with probability ε uniform over ``actions``."""
    probs = dict.fromkeys(actions, epsilon / len(actions))
    for a in greedy:
        probs[a] = probs.get(a, 0.0) + (1.0 - epsilon) / len(greedy)
    return float(entropy(list(probs.values())))


def sokoban_oracle(env: Any, epsilon: float, seed: int):
    """Each member's ε-noisy solver (:class:`~agentgym_credit.envs.sokoban.EpsilonOraclePolicy`, seeded
    ``seed · 100003 + member``) as a tree-rollout policy; the entropy is that of its action distribution,
    ε/4 on every move plus (1 − ε) spread over the optimal ones."""
    members = env.unwrapped.members
    policies = [EpsilonOraclePolicy(epsilon, seed=seed * 100_003 + i) for i in range(env.num_envs)]

    def policy(obs: list[Any], ids: list[int], infos: list[dict[str, Any]]) -> list[OracleStep]:
        out = []
        for i in ids:
            member = members[i].unwrapped
            optimal = member.solver.optimal_actions(member.room_state) or list(ACTIONS)
            out.append(OracleStep(policies[i].act(member), noisy_entropy(epsilon, optimal, list(ACTIONS))))
        return out

    return policy


def alfworld_oracle(env: Any, epsilon: float, seed: int):
    """The ε-noisy planner (the planner's next command, a random admissible command with probability ε) as a
    tree-rollout policy; the ground truth is +1 for the planner's command, −1 otherwise."""
    members = env.unwrapped.members
    rng = np.random.default_rng(seed)

    def policy(obs: list[Any], ids: list[int], infos: list[dict[str, Any]]) -> list[OracleStep]:
        out = []
        for i, info in zip(ids, infos, strict=True):
            expert = members[i].unwrapped.expert_next_action()
            admissible = list(info.get("admissible_actions", [])) or [expert or "look"]
            explore = expert is None or rng.random() < epsilon
            action = admissible[rng.integers(len(admissible))] if explore else expert
            h = noisy_entropy(epsilon, [expert] if expert else admissible, admissible)
            out.append(OracleStep(action, h, 1.0 if action == expert else -1.0))
        return out

    return policy


@dataclass
class Played:
    """A rollout of the benchmark: the batch, each row's ground truth and the rollout's statistics."""

    batch: StepBatch
    gt: np.ndarray
    stats: dict[str, float] = field(default_factory=dict)


def play(env: str, epsilon: float, groups: int, group_size: int, seed: int, schedule: TreeSchedule | None = None,
         **env_kwargs: Any) -> Played:
    """Roll out the ε-oracle on ``groups`` tasks of ``env`` (``"sokoban"`` or ``"alfworld"``): ``group_size``
    chains per task, or trees grown by ``schedule`` on the task's ``group_size`` members
    (:func:`~agentgym_credit.baselines.tree_rollout.grow_trees`).

    Sokoban's ground truth is ``d(s) − d(s')`` from the solver's optimal distances (−2 into a dead end, NaN
    from one); ALFWorld's ±1 from the planner.
    """
    env_id = "Sokoban-Group-v0" if env == "sokoban" else "ALFWorld-Group-v0"
    vec = gym.make_vec(env_id, num_envs=groups * group_size, group_size=group_size,
                       vectorization_mode="vector_entry_point", **env_kwargs)
    rec = RecordStepBatch(vec, info_keys=("optimal_distance",) if env == "sokoban" else ())
    oracle = sokoban_oracle if env == "sokoban" else alfworld_oracle
    chains = TreeSchedule(trees=group_size, rounds=0)  # every member one episode from the task's start
    try:
        with tqdm(desc=f"{env} ε={epsilon}", leave=False) as bar:
            grown = grow_trees(rec, oracle(vec, epsilon, seed), schedule or chains, seed=seed,
                               rng=np.random.default_rng([seed, 1]), on_step=lambda k, n: bar.update(1))
        batch = rec.batch()
        extras = rec.recorder.extras(batch)
    finally:
        vec.close()
    if env == "sokoban":
        d_before = extras["optimal_distance_before"].astype(float)
        d_after = extras["optimal_distance"].astype(float)
        with np.errstate(invalid="ignore"):
            gt = np.where(np.isinf(d_after), -2.0, d_before - d_after)
        gt[np.isinf(d_before)] = np.nan
    else:
        gt = np.array([grown.outputs[(int(tr), int(t))].gt for tr, t in zip(batch.traj, batch.t, strict=True)])
    return Played(batch, gt, grown.stats)


def rollout_alfworld(epsilon: float, groups: int, group_size: int, seed: int, max_steps: int = 30,
                     task_types: list[str] | None = None) -> tuple[StepBatch, np.ndarray]:
    """ε-planner rollouts of ALFWorld groups; gt = +1 if the command was the planner's next one, else −1."""
    out = play("alfworld", epsilon, groups, group_size, seed, max_steps=max_steps, task_types=task_types)
    return out.batch, out.gt


def rollout(epsilon: float, groups: int, group_size: int, seed: int, **env_kwargs) -> tuple[StepBatch, np.ndarray]:
    """Roll out ε-oracle Sokoban groups; return the batch and the ground-truth step quality per row."""
    out = play("sokoban", epsilon, groups, group_size, seed, **env_kwargs)
    return out.batch, out.gt


def tabular_critic(batch: StepBatch, gamma: float = 0.99, rewards: np.ndarray | None = None,
                   ) -> tuple[np.ndarray, np.ndarray]:
    """V(s) per row (mean discounted return from s within its group) and progress r + V(s') − V(s)."""
    rewards = batch.reward if rewards is None else rewards
    returns = discounted_returns(rewards, batch.order, batch.traj_starts, gamma)
    states = ExactMatcher().match(batch)
    sid, k = dense_ids(states.state)
    v_state = np.bincount(sid, weights=returns, minlength=k) / np.maximum(np.bincount(sid, minlength=k), 1)
    value = v_state[sid]
    # V(s') for the next state: the value of the matching state if it was visited, 0 at episode end
    lookup = dict(zip(states.state.tolist(), value.tolist(), strict=False))
    v_next = np.array([0.0 if d else lookup.get(int(n), 0.0) for n, d in zip(states.next_state, batch.done, strict=True)])
    return value, rewards + v_next - value


def pairwise_accuracy(batch: StepBatch, adv: np.ndarray, gt: np.ndarray) -> float:
    """Fraction of same-state pairs with different gt that the advantages order like gt."""
    sid = ExactMatcher().match(batch).state
    ok, total = 0.0, 0
    for s in np.unique(sid):
        rows = np.flatnonzero((sid == s) & np.isfinite(gt))
        if len(rows) < 2:
            continue
        g, a = gt[rows], adv[rows]
        dg = np.sign(g[:, None] - g[None, :])
        da = np.sign(a[:, None] - a[None, :])
        pairs = dg > 0
        total += int(pairs.sum())
        ok += float((da[pairs] > 0).sum() + 0.5 * (da[pairs] == 0).sum())
    return ok / total if total else float("nan")


def evaluate(batch: StepBatch, gt: np.ndarray, estimators: dict[str, dict] | None = None) -> list[dict]:
    """Each estimator's advantages on ``batch`` against the ground truth ``gt`` (NaN rows left out).

    Args:
        batch: the rollouts.
        gt: the ground-truth quality of each row's step.
        estimators: label -> parameters (default :data:`ESTIMATORS`).

    Returns:
        One row per estimator: ``estimator``, ``spearman``, ``pairwise`` and ``sign``.
    """
    estimators = ESTIMATORS if estimators is None else estimators
    names = {spec.get("estimator", label) for label, spec in estimators.items()}
    full = batch
    if names & set(CRITIC_ESTIMATORS):  # the tabular critic walks chains
        value, progress = tabular_critic(batch)
        full = batch.with_columns(value=value, progress=progress)
    # SPA's critic regresses the fused-reward returns, so GAE over fused rewards uses that critic
    mask = np.isfinite(gt)
    rows = []
    for label, spec in estimators.items():
        params = dict(spec)
        name = params.pop("estimator", label)
        target = full
        if name == "spa":
            fused = params["alpha"] * progress + params["beta"] * batch.valid
            target = full.with_columns(value=tabular_critic(batch, params["gamma"], fused)[0])
        adv = compute_advantages(target, name, **params)
        rho = spearmanr(adv[mask], gt[mask]).statistic if np.ptp(adv[mask]) > 0 else 0.0
        nz = mask & (gt != 0)
        sign = float((np.sign(adv[nz]) == np.sign(gt[nz])).mean()) if nz.any() else float("nan")
        rows.append({"estimator": label, "spearman": float(rho), "pairwise": pairwise_accuracy(batch, adv, gt),
                     "sign": sign})
    return rows


def plot(results: list[dict], path: Path, title: str) -> None:
    """Three bar panels (Spearman, pairwise, sign accuracy), one bar per estimator and ε, saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epsilons = sorted({r["epsilon"] for r in results})
    names = list(dict.fromkeys(r["estimator"] for r in results))
    fig, axes = plt.subplots(1, 3, figsize=(18, 4.8))
    width = 0.8 / len(epsilons)
    for ax, metric in zip(axes, ("spearman", "pairwise", "sign"), strict=True):
        for k, eps in enumerate(epsilons):
            vals = [next(r[metric] for r in results if r["epsilon"] == eps and r["estimator"] == n) for n in names]
            ax.bar(np.arange(len(names)) + k * width, vals, width, label=f"ε = {eps}")
        ax.set_xticks(np.arange(len(names)) + width * (len(epsilons) - 1) / 2)
        ax.set_xticklabels(names, rotation=30)
        ax.set_title({"spearman": "Spearman ρ (advantage vs. ground truth)",
                      "pairwise": "pairwise ranking accuracy within states",
                      "sign": "sign accuracy"}[metric])
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Step credit vs. ground truth on {title}")
    # one legend for the three panels, in its own row under the title: inside a panel it covered bars
    handles, labels = axes[0].get_legend_handles_labels()
    columns = min(len(epsilons), 5)  # chains vs trees: two rows of five
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.93), ncol=columns, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.88 - 0.05 * (-(-len(epsilons) // columns) - 1)))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def column_legend(env: str, tree: bool = False) -> list[str]:
    """One line per column of the results table (``tree``: of the chains-vs-trees table), printed (and written)
    under it."""
    truth = "+1 for the planner's next command, -1 for any other"
    if env == "sokoban":
        truth = "the solver's moves-to-solved before minus after the move; -2 into a dead end"
    rollout = [
        "rollout: chain (every member one episode from the task's start) or tree (members forked mid-episode).",
        "steps: agent steps played (a shared prefix step once); budget/task: the trees' cap of agent steps per task.",
        "episodes: finished episodes (a tree's leaves); success: the share of them that solved the task.",
        "steps in a group ≥ 2: the share of steps taken from a state that another step of its task group was also "
        "taken from (an anchor-state group of two or more).",
    ] if tree else []
    return [
        "ε: the probability that the rolled-out policy plays a random action instead of the oracle's.",
        *rollout,
        "estimator: the credit estimator, with the parameters listed at the top of "
        "agentgym_credit/evaluation/credit_quality.py.",
        f"Spearman ρ: rank correlation of each step's advantage with its ground-truth quality ({truth}); "
        "1 = the same order, 0 = unrelated.",
        "pairwise acc.: over pairs of steps taken from the same state of a group whose ground truth differs, "
        "the share the advantages order like the ground truth (0.5 = chance).",
        "sign acc.: over steps whose ground truth is not 0, the share whose advantage has its sign "
        "(0.5 = chance).",
    ]


def build_parser(default_out: Path = DEFAULT_OUT, prog: str = "agc run") -> argparse.ArgumentParser:
    """The flags of ``agc run`` (and of ``benchmarks/credit_quality.py``, with its own output folder)."""
    from agentgym_credit.cli_args import (
        ArgumentParser,
        HelpFormatter,
        bounded,
        non_negative_int,
        positive_int,
        probability,
    )

    ap = ArgumentParser(prog=prog, description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    ap.add_argument("--env", choices=["sokoban", "alfworld"], default="sokoban",
                    help="sokoban: the exact solver's ground truth; alfworld: the planner's (the alfworld extra).")
    ap.add_argument("--max-steps", type=positive_int, default=30, help="episode length for ALFWorld.")
    ap.add_argument("--groups", type=positive_int, default=32, help="task groups rolled out per ε.")
    ap.add_argument("--group-size", type=bounded(int, 2), default=8,
                    help="members per group (same initial state; at least 2: a group of one compares "
                         "nothing).")
    ap.add_argument("--epsilons", type=probability, nargs="+", default=[0.1, 0.2, 0.3, 0.5, 0.7],
                    help="the noise levels ε: the probability of a random action in place of the oracle's, "
                         "one rollout and one table block each.")
    ap.add_argument("--seed", type=non_negative_int, default=0, help="reset seed of the rollouts.")
    ap.add_argument("--task-types", nargs="+", default=None,
                    help="ALFWorld task types to draw games from (default all; the planner's search is short "
                         "for pick_and_place_simple and look_at_obj_in_light, seconds per state for the others).")
    ap.add_argument("--reward", choices=["shaped", "sparse"], default="shaped",
                    help="Sokoban reward: gym-sokoban's shaped reward (the papers' code) or 10 × solved.")
    ap.add_argument("--rollout", choices=["chain", "tree"], default="chain",
                    help="chain: every estimator on chains; tree: chains and trees on the same tasks at an equal "
                         "budget of agent steps, for the estimators that accept trees.")
    ap.add_argument("--tree-schedule", "--schedule", dest="schedule", choices=TREE_SCHEDULES, default="fixed",
                    help="--rollout tree: Tree-GRPO's random nodes (fixed) or the oracle's uncertain steps "
                         "(entropy).")
    ap.add_argument("--trees", type=positive_int, default=2, help="--rollout tree: M, trees per task.")
    ap.add_argument("--expand-nodes", "--expand", dest="expand", type=positive_int, default=2,
                    help="--rollout tree, fixed schedule: N, nodes per tree and round.")
    ap.add_argument("--entropy-margin", "--margin", dest="margin", type=float, default=0.1,
                    help="--rollout tree, entropy schedule: nats above the running mean that fork a step.")
    ap.add_argument("--branch-children", "--children", dest="children", type=positive_int, default=2,
                    help="--rollout tree, entropy schedule: forks per step.")
    ap.add_argument("--out-dir", "--out", dest="out", type=Path, default=default_out, metavar="DIR",
                    help=f"folder for the table, its CSV and its figure (default {default_out}).")
    return ap
def share_grouped(batch: StepBatch) -> float:
    """The share of the steps that fall in a step group of two or more: steps from the same state (identical
    anchor text) of the same task group, GiGPO's anchor-state groups (a singleton group gives no step-level
    comparison)."""
    if not len(batch):
        return 0.0
    sid = ExactMatcher().match(batch).state
    return float((np.bincount(sid)[sid] > 1).mean())


def compare_rollouts(env: str, epsilon: float, groups: int, group_size: int, seed: int, schedule: TreeSchedule,
                     estimators: dict[str, dict], **env_kwargs: Any) -> list[dict]:
    """Chains and trees on the same tasks at an equal budget of agent steps, scored against the ground truth.

    The chains (``group_size`` per task) are played first; the trees then get, per task, the chains' mean number
    of steps per task (rounded down; at least what the first ``schedule.trees`` chains may take,
    ``trees × max_steps``) as their budget.

    Returns:
        One row per rollout and estimator: ``rollout``, ``rows`` (agent steps), ``budget``, ``episodes``,
        ``success`` (over episodes), ``grouped`` (:func:`share_grouped`), ``forks``, then the estimator's
        ``spearman``, ``pairwise`` and ``sign``.
    """
    chains = play(env, epsilon, groups, group_size, seed, **env_kwargs)
    budget = max(len(chains.batch) // groups, schedule.trees * int(chains.stats["max_steps"]))
    trees = play(env, epsilon, groups, group_size, seed, replace(schedule, budget=budget), **env_kwargs)
    rows = []
    for label, played, cap in (("chain", chains, None), ("tree", trees, budget)):
        batch = played.batch
        won = batch.success[batch.done]
        info = {"rollout": label, "rows": len(batch), "budget": cap, "episodes": int(batch.num_leaves),
                "success": float(won.mean()), "grouped": share_grouped(batch), "forks": played.stats.get("forks", 0.0)}
        rows += [{**info, **row} for row in evaluate(batch, played.gt, estimators)]
    return rows


def _write(results: list[dict], out: Path, stem: str, title: str, text: str, lines: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text + "\n\n" + "\n".join(lines) + "\n")
    with open(out / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows(results)


def main(argv: list[str] | None = None, default_out: Path = DEFAULT_OUT, prog: str = "agc run") -> list[dict]:
    """``agc run``: roll out, score every estimator for each ε, print the table, write it with its CSV and figure.

    Args:
        argv: the command-line arguments (default ``sys.argv[1:]``).
        default_out: the output folder when ``--out-dir`` is not given.
        prog: the command's name in its help.

    Returns:
        One row per ε and estimator: ``epsilon``, ``rows``, ``success``, ``estimator``, ``spearman``,
        ``pairwise``, ``sign``; with ``--rollout tree`` one per ε, rollout (chain, tree) and estimator, with
        the columns of :func:`compare_rollouts`.
    """
    from agentgym_credit.cli_args import make_out_dir

    ap = build_parser(default_out, prog)
    args = ap.parse_args(argv)
    if args.env == "alfworld":
        try:
            from agentgym_credit.envs.alfworld.data import normalize_task_types
        except ImportError as exc:
            ap.error(f"--env alfworld needs ALFWorld ({exc}); install the alfworld extra: "
                     "pip install -e '.[alfworld]'")
        try:  # ids (1-6) become names, for the environment and the table's title
            args.task_types = list(normalize_task_types(args.task_types) or []) or None
        except ValueError as exc:
            ap.error(f"--task-types: {exc}")
    make_out_dir(ap, args.out)  # before the rollouts: a folder that cannot be written fails now, not after them
    tree = args.rollout == "tree"
    estimators = estimators_for(args.env, TREE_ESTIMATORS if tree else None)
    env_kwargs: dict[str, Any] = ({"max_steps": args.max_steps, "task_types": args.task_types}
                                  if args.env == "alfworld" else {"reward": args.reward})
    schedule = TreeSchedule(schedule=args.schedule, trees=args.trees, expand=args.expand, rounds=None,
                            margin=args.margin, children=args.children)  # budget: compare_rollouts
    results = []
    for eps in tqdm(args.epsilons, desc="credit quality (ε)"):
        if tree:
            results += [{"epsilon": eps, **row} for row in compare_rollouts(
                args.env, eps, args.groups, args.group_size, args.seed, schedule, estimators, **env_kwargs)]
            continue
        played = play(args.env, eps, args.groups, args.group_size, args.seed, **env_kwargs)
        batch = played.batch
        for row in evaluate(batch, played.gt, estimators):
            results.append({"epsilon": eps, "rows": len(batch), "success": float(batch.traj_success.mean()), **row})
    stem = "credit_quality" if args.env == "sokoban" else f"credit_quality_{args.env}"
    if args.env == "sokoban" and args.reward != "shaped":
        stem += f"_{args.reward}"
    title = (f"Sokoban-Group-v0 (6×6, 1 box, {args.reward} reward)" if args.env == "sokoban"
             else "ALFWorld-Group-v0 (shipped train games" + (f": {', '.join(args.task_types)})" if args.task_types
                                                               else ")"))
    if tree:
        stem += "_tree" if args.schedule == "fixed" else "_tree_entropy"
        lines = ["| ε | rollout | steps | budget/task | episodes | success | steps in a group ≥ 2 | estimator | "
                 "Spearman ρ | pairwise acc. | sign acc. |", "|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
        for r in results:
            lines.append(f"| {r['epsilon']} | {r['rollout']} | {r['rows']} | {r['budget'] or '–'} | {r['episodes']} | "
                         f"{r['success']:.0%} | {r['grouped']:.3f} | {r['estimator']} | {r['spearman']:.3f} | "
                         f"{r['pairwise']:.3f} | {r['sign']:.3f} |")
        shape = (f"{args.trees} trees per task, " + (f"{args.expand} random nodes per tree and round (Tree-GRPO)"
                 if args.schedule == "fixed" else f"forks of {args.children} where the oracle's entropy exceeds "
                 f"the running mean by {args.margin} nats (ARPO)"))
        head = (f"Chains vs trees on {title}, {args.groups} tasks, seed {args.seed}: {args.group_size} chains per "
                f"task, or {shape} on the task's {args.group_size} members, rounds until the budget is spent; the "
                "trees' budget per task is the chains' mean steps per task")
    else:
        lines = ["| ε | estimator | Spearman ρ | pairwise acc. | sign acc. |", "|---:|---|---:|---:|---:|"]
        for r in results:
            lines.append(f"| {r['epsilon']} | {r['estimator']} | {r['spearman']:.3f} | {r['pairwise']:.3f} | "
                         f"{r['sign']:.3f} |")
        summary = ", ".join(f"ε={e}: {n} steps, success {s:.0%}" for e, n, s in
                            sorted({(r['epsilon'], r['rows'], r['success']) for r in results}))
        head = f"Credit quality on {title}, {args.groups} groups × {args.group_size}, seed {args.seed}. {summary}."
        print(summary)
    legend = column_legend(args.env, tree)
    print("\n".join(lines))
    print("\n".join(legend))
    _write(results, args.out, stem, title, head, [*lines, "", *(f"- {line}" for line in legend)])
    if tree:
        labelled = [{**r, "epsilon": f"{r['epsilon']} {r['rollout']}"} for r in results]
        plot(labelled, args.out / f"{stem}.png", f"{title}: chains vs trees")
    else:
        plot(results, args.out / f"{stem}.png", title)
    print(f"table: {args.out / (stem + '.md')}\nplot:  {args.out / (stem + '.png')}")
    return results
