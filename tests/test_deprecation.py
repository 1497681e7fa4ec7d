"""Names that moved keep working from their old module, with a DeprecationWarning naming the new place."""

from __future__ import annotations

import importlib

import pytest

from agentgym_credit.deprecation import moved

ALIASES = [
    ("agentgym_credit.wrappers.prompting", "search_results", "agentgym_credit.envs.searchqa.spec"),
    ("agentgym_credit.evaluation", "ALFWORLD_TASK_COLUMNS", "agentgym_credit.envs.alfworld.spec:TASK_COLUMNS"),
    ("agentgym_credit.evaluation.protocols", "ALFWORLD_TASK_COLUMNS", "agentgym_credit.envs.alfworld.spec:TASK_COLUMNS"),
    ("agentgym_credit.evaluation.protocols", "SOKOBAN_DEFAULT_EPISODES",
     "agentgym_credit.envs.sokoban.spec:DEFAULT_EPISODES"),
    ("agentgym_credit.evaluation.credit_quality", "OracleStep", "agentgym_credit.envs.credit_probe:ProbeStep"),
    ("agentgym_credit.evaluation.credit_quality", "noisy_entropy", "agentgym_credit.envs.credit_probe"),
    ("agentgym_credit.evaluation.credit_quality", "sokoban_oracle",
     "agentgym_credit.envs.sokoban.credit_probe:epsilon_oracle"),
    ("agentgym_credit.evaluation.credit_quality", "alfworld_oracle",
     "agentgym_credit.envs.alfworld.credit_probe:epsilon_oracle"),
]
TRAINER_ALIASES = [
    ("agentgym_credit.baselines.rollout", "evaluate", "agentgym_credit.evaluation.runner:held_out"),
    ("agentgym_credit.baselines.rollout", "HFGenerator", "agentgym_credit.baselines.generation"),
    ("agentgym_credit.baselines.rollout", "StopMatcher", "agentgym_credit.baselines.generation"),
    ("agentgym_credit.baselines.trainer", "main", "agentgym_credit.baselines.train_cli"),
    ("agentgym_credit.baselines.trainer", "build_parser", "agentgym_credit.baselines.train_cli"),
    ("agentgym_credit.baselines.trainer", "check_device", "agentgym_credit.baselines.runtime"),
    ("agentgym_credit.baselines.trainer", "vllm_cpu_build", "agentgym_credit.baselines.runtime"),
    ("agentgym_credit.baselines.trainer", "check_env_id", "agentgym_credit.envs.spec"),
    ("agentgym_credit.baselines.trainer", "synthetic_batch", "agentgym_credit.credit.registry:probe_batch"),
    ("agentgym_credit.baselines.trainer", "PENALTY_CREDITS", "agentgym_credit.baselines.config"),
    ("agentgym_credit.baselines.sft", "SOKOBAN_MOVES", "agentgym_credit.envs.sokoban.state:ACTIONS"),
    ("agentgym_credit.baselines.policy", "SOKOBAN_MOVES", "agentgym_credit.envs.sokoban.state:ACTIONS"),
]


def _check(old: str, name: str, new: str) -> None:
    where, _, attr = new.partition(":")
    expected = getattr(importlib.import_module(where), attr or name)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {where}"):
        assert getattr(importlib.import_module(old), name) is expected


@pytest.mark.parametrize("old, name, new", ALIASES)
def test_moved_names_still_import(old, name, new):
    _check(old, name, new)


@pytest.mark.parametrize("old, name, new", TRAINER_ALIASES)
def test_moved_trainer_names_still_import(old, name, new):
    pytest.importorskip("transformers")
    _check(old, name, new)


def test_a_name_that_never_existed_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        moved("agentgym_credit.wrappers.prompting", "nope", {})
    import agentgym_credit.wrappers.prompting as prompting

    with pytest.raises(AttributeError):
        prompting.nope  # noqa: B018
