"""``agc run``: every estimator's step credit against ground truth, on a tiny budget."""

from __future__ import annotations

import numpy as np
import pytest

from agentgym_credit.cli import main as agc
from agentgym_credit.evaluation import credit_quality


def test_agc_run_writes_the_table_csv_and_figure(tmp_path, capsys) -> None:
    assert agc(["run", "--groups", "4", "--group-size", "4", "--epsilons", "0.3", "--out-dir", str(tmp_path)]) == 0
    assert "| 0.3 | graphgpo |" in capsys.readouterr().out
    md = (tmp_path / "credit_quality.md").read_text()
    assert md.startswith("Credit quality on Sokoban-Group-v0 (6×6, 1 box, shaped reward), 4 groups × 4")
    assert (tmp_path / "credit_quality.csv").exists() and (tmp_path / "credit_quality.png").stat().st_size > 1000


def test_state_aware_credit_beats_the_trajectory_baseline(tmp_path) -> None:
    rows = credit_quality.main(["--groups", "4", "--group-size", "4", "--epsilons", "0.3"], default_out=tmp_path)
    by = {r["estimator"]: r for r in rows}
    assert set(by) == {"grpo", "rloo", "gigpo", "salt", "graphgpo", "step_gae", "spa", "spa β=0", "spa α=0", "hgpo",
                       "empg_grpo", "empg_gigpo"}
    assert all(np.isfinite(r["spearman"]) for r in rows)
    # state-aware credit must beat the trajectory-level baseline on ground truth
    assert by["graphgpo"]["spearman"] > by["grpo"]["spearman"]
    assert by["gigpo"]["pairwise"] > by["grpo"]["pairwise"]
    assert by["hgpo"]["pairwise"] > by["grpo"]["pairwise"]
    # every oracle step executes, so SPA's grounding bonus (β per step) rewards length: alone it orders steps
    # against the ground truth, while SPA's progress term orders them with it
    assert by["spa α=0"]["spearman"] < 0 < by["spa β=0"]["spearman"]


def test_the_policies_report_the_entropy_of_their_action_choice() -> None:
    moves = ["up", "down", "left", "right"]
    # ε = 0.2, one optimal move: 0.8 + 0.05 on it, 0.05 on each other move
    expected = -(0.85 * np.log(0.85) + 3 * 0.05 * np.log(0.05))
    assert credit_quality.noisy_entropy(0.2, ["up"], moves) == pytest.approx(expected)
    assert credit_quality.noisy_entropy(0.0, ["up", "left"], moves) == pytest.approx(np.log(2))
    assert credit_quality.noisy_entropy(1.0, ["up"], moves) == pytest.approx(np.log(4))
    # a greedy choice outside the listed actions (ALFWorld's planner command not admissible) keeps its mass
    assert credit_quality.noisy_entropy(0.5, ["go"], ["a"]) == pytest.approx(np.log(2))
    batch, _ = credit_quality.rollout(0.3, 2, 2, seed=0)
    assert batch.entropy is not None and len(np.unique(batch.entropy)) > 1  # states differ in optimal moves
    assert np.all((batch.entropy > 0) & (batch.entropy <= np.log(4) + 1e-12))


def test_graphgpo_takes_the_environments_omega_preset() -> None:
    assert credit_quality.estimators_for("alfworld")["graphgpo"] == {"omega": "alfworld"}
    assert credit_quality.ESTIMATORS["graphgpo"] == {"omega": "sokoban"}  # the table's default is not changed
    assert list(credit_quality.estimators_for("alfworld")) == list(credit_quality.ESTIMATORS)


def test_alfworld_ground_truth_from_the_planner(tmp_path, monkeypatch) -> None:
    pytest.importorskip("alfworld")
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)  # unset: the shipped games
    rows = credit_quality.main(["--env", "alfworld", "--groups", "1", "--group-size", "3", "--epsilons", "0.5",
                                "--max-steps", "8"], default_out=tmp_path)
    assert (tmp_path / "credit_quality_alfworld.md").exists()
    assert {r["estimator"] for r in rows} == set(credit_quality.ESTIMATORS) and rows[0]["rows"] > 0


def test_chains_and_trees_at_an_equal_budget(tmp_path) -> None:
    rows = credit_quality.main(["--rollout", "tree", "--groups", "4", "--group-size", "6", "--epsilons", "0.3"],
                               default_out=tmp_path)
    assert (tmp_path / "credit_quality_tree.md").read_text().startswith("Chains vs trees on Sokoban-Group-v0")
    assert (tmp_path / "credit_quality_tree.png").stat().st_size > 1000
    by = {(r["rollout"], r["estimator"]): r for r in rows}
    assert {e for _, e in by} == set(credit_quality.TREE_ESTIMATORS)
    chain, tree = by["chain", "grpo"], by["tree", "grpo"]
    assert tree["rows"] <= tree["budget"] * 4 and tree["forks"] > 0 and chain["budget"] is None
    assert tree["episodes"] > 4 * 2  # more episodes than its two first chains per task
    # on chains, tree_grpo is grpo; on trees it differs (shared steps get their subtrees' credit)
    assert by["chain", "tree_grpo"]["spearman"] == pytest.approx(chain["spearman"])
    assert all(np.isfinite(r["spearman"]) and 0 <= r["grouped"] <= 1 for r in rows)


def test_a_tree_rollout_records_the_ground_truth_of_every_step() -> None:
    schedule = credit_quality.TreeSchedule(schedule="entropy", trees=2, margin=0.0, children=2, budget=60)
    played = credit_quality.play("sokoban", 0.3, 2, 4, seed=3, schedule=schedule)
    batch = played.batch
    assert batch.is_tree and played.stats["forks"] > 0 and len(played.gt) == len(batch)
    finite = np.isfinite(played.gt)
    assert finite.mean() > 0.5 and set(np.unique(played.gt[finite])) <= {-2.0, -1.0, 0.0, 1.0}
    # the ground truth is a function of the state and the move: the same wherever a segment starts
    seen: dict[tuple[str, str], float] = {}
    for state, action, gt in zip(batch.state, batch.action, played.gt, strict=True):
        if np.isfinite(gt):
            assert seen.setdefault((state, action), gt) == gt
    forked = batch.parent != batch.traj
    assert np.isfinite(played.gt[forked & (batch.t > 0)]).any()


def test_tree_flags_take_agc_trains_names_and_the_short_ones() -> None:
    parser = credit_quality.build_parser()
    long = parser.parse_args(["--tree-schedule", "entropy", "--expand-nodes", "3", "--entropy-margin", "0.2",
                              "--branch-children", "4"])
    short = parser.parse_args(["--schedule", "entropy", "--expand", "3", "--margin", "0.2", "--children", "4"])
    assert vars(long) == vars(short)
    assert (long.schedule, long.expand, long.margin, long.children) == ("entropy", 3, 0.2, 4)
