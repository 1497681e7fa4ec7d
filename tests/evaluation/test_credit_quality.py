"""``agc run``: every estimator's step credit against ground truth, on a tiny budget."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

from agentgym_credit.cli import main as agc
from agentgym_credit.envs.spec import families
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
    batch, _ = credit_quality.rollout(0.3, 2, 2, seed=0)
    assert batch.entropy is not None and len(np.unique(batch.entropy)) > 1  # states differ in optimal moves
    assert np.all((batch.entropy > 0) & (batch.entropy <= np.log(4) + 1e-12))


def test_no_environment_is_named_but_the_default() -> None:
    """Every environment's knowledge is in its credit probe: the module compares nothing with a family's name,
    and names one only as the default (and in the deprecated ALFWorld wrapper)."""
    names = {spec.name for spec in families()}
    tree = ast.parse(Path(credit_quality.__file__).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                assert not (isinstance(operand, ast.Constant) and operand.value in names), ast.unparse(node)
    allowed = {"DEFAULT_ENV", "rollout_alfworld"}
    for top in tree.body:
        where = {t.id for t in getattr(top, "targets", []) if isinstance(t, ast.Name)} | {getattr(top, "name", "")}
        named = [n.value for n in ast.walk(top) if isinstance(n, ast.Constant) and n.value in names]
        assert not named or where & allowed, f"{ast.unparse(top)[:80]} names {named}"


def test_the_env_choices_are_the_families_with_a_probe() -> None:
    assert credit_quality.probe_families() == (credit_quality.DEFAULT_ENV, "alfworld")  # the default first
    assert credit_quality.build_parser().parse_args([]).env == credit_quality.DEFAULT_ENV
    with pytest.raises(SystemExit):
        credit_quality.build_parser().parse_args(["--env", "webshop"])  # a family without a probe


def test_rollout_alfworld_is_deprecated_for_rollout_with_the_env() -> None:
    pytest.importorskip("alfworld")
    with pytest.warns(DeprecationWarning, match="env='alfworld'"):
        old = credit_quality.rollout_alfworld(0.5, 1, 2, seed=0, max_steps=4, task_types=["pick_and_place_simple"])
    new = credit_quality.rollout(0.5, 1, 2, seed=0, env="alfworld", max_steps=4, task_types=["pick_and_place_simple"])
    assert list(old[0].action) == list(new[0].action) and np.array_equal(old[1], new[1])


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


def test_a_family_without_its_extra_names_the_install(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "agentgym_credit.envs.alfworld.data", None)  # as if alfworld were missing
    with pytest.raises(SystemExit):
        credit_quality.main(["--env", "alfworld", "--out-dir", str(tmp_path)])
    assert "--env alfworld needs the alfworld extra" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing rolled out or written
