"""``agc eval``: tables printed, JSON and Markdown written, clear exit for unavailable environments."""

from __future__ import annotations

import json
import sys
import types

import gymnasium as gym

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
