"""``agc eval``: tables printed, JSON and Markdown written, clear exit for unavailable environments."""

from __future__ import annotations

import json
import sys
import types

import gymnasium as gym
import pytest

from agentgym_credit.cli import main


def test_agc_eval_writes_json_and_markdown(tmp_path, capsys) -> None:
    rc = main(["eval", "--env", "Sokoban-Group-v0", "--policy", "oracle", "--episodes", "12",
               "--out-dir", str(tmp_path), "--no-progress"])
    assert rc == 0
    data = json.loads((tmp_path / "eval_Sokoban-Group-v0_default_oracle.json").read_text())
    assert data["policy"] == "oracle" and data["settings"]["max_steps"] == 15
    assert len(data["episodes"]) == 12 and data["metrics"]["overall"]["All"]["n"] == 12
    assert "| All |" in capsys.readouterr().out


def test_agc_eval_loads_a_module_function_policy(tmp_path, monkeypatch) -> None:
    module = types.ModuleType("agc_eval_user_policy")
    module.respond = lambda prompts: ["<think>t</think><action>left</action>" for _ in prompts]
    monkeypatch.setitem(sys.modules, "agc_eval_user_policy", module)
    rc = main(["eval", "--env", "Sokoban-Group-v0", "--policy", "agc_eval_user_policy:respond",
               "--episodes", "3", "--out-dir", str(tmp_path), "--no-progress"])
    assert rc == 0
    data = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert data["policy"] == "agc_eval_user_policy:respond"
    assert all(e["invalid_steps"] == 0 for e in data["episodes"])


def test_agc_eval_says_why_an_environment_cannot_be_evaluated(capsys, monkeypatch) -> None:
    monkeypatch.delitem(gym.registry, "AppWorld-Group-v0", raising=False)  # as in an installation without it
    assert main(["eval", "--env", "AppWorld-Group-v0", "--policy", "random"]) == 2
    assert "not registered" in capsys.readouterr().err


def test_eval_precision_choices_are_the_policy_loaders() -> None:
    from agentgym_credit.baselines.policy import PRECISIONS
    from agentgym_credit.evaluation.cli import build_parser

    action = next(a for a in build_parser()._actions if a.dest == "precision")
    assert tuple(action.choices) == PRECISIONS


def test_agc_eval_takes_an_agc_train_run_folder(tmp_path) -> None:
    """The run folder holds the run's own config.json next to policy/: the exported policy is evaluated."""
    pytest.importorskip("transformers")
    run = tmp_path / "run"
    assert main(["train", "--env", "Sokoban-Group-v0", "--estimator", "grpo", "--model", "tiny", "--groups", "1",
                 "--group-size", "2", "--iters", "1", "--max-new-tokens", "4", "--env-kwarg", "max_steps=2",
                 "--no-progress-bar", "--cache-dir", str(tmp_path / "cache"), "--out-dir", str(run)]) == 0
    assert "model_type" not in json.loads((run / "config.json").read_text())
    rc = main(["eval", "--env", "Sokoban-Group-v0", "--policy", str(run), "--episodes", "2", "--max-steps", "2",
               "--max-new-tokens", "4", "--out-dir", str(tmp_path / "eval"), "--no-progress"])
    assert rc == 0
    data = json.loads(next((tmp_path / "eval").glob("*.json")).read_text())
    assert len(data["episodes"]) == 2


def test_agc_eval_env_kwargs_reach_the_environment_and_the_results(tmp_path) -> None:
    """Rooms one move from solved: the random policy (1 valid move in 4) wins far more than on default rooms."""
    rc = main(["eval", "--env", "Sokoban-Group-v0", "--policy", "random", "--episodes", "64", "--env-kwarg",
               "max_steps=1", "--env-kwarg", "max_solution_steps=1", "--out-dir", str(tmp_path), "--no-progress"])
    assert rc == 0
    data = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert data["settings"]["env_kwargs"] == {"max_steps": 1, "max_solution_steps": 1}
    assert data["settings"]["max_steps"] == 1 and all(e["steps"] == 1 for e in data["episodes"])
    assert 0.1 < data["headline"] / 100 < 0.45  # one of the four moves solves the room
    assert "environment max_steps=1, max_solution_steps=1" in next(tmp_path.glob("*.md")).read_text()
