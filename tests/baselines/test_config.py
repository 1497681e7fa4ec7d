"""The trainers' settings: defaults that suit a CPU, and group_size=1 only where a lone trajectory is credited."""

from __future__ import annotations

import pytest

from agentgym_credit.baselines.config import SFTConfig, TrainConfig, build_parser, config_from_args


def test_agc_train_and_sft_default_to_the_tiny_model() -> None:
    """``agc train`` with no flags trains the tiny model (SmolLM2 takes hours per run on 2 CPU cores)."""
    for config_type in (TrainConfig, SFTConfig):
        parser = build_parser(config_type, "agc", "")
        config = config_from_args(config_type, parser.parse_args([]))
        assert config.model == "tiny", config_type
    help_text = " ".join(build_parser(TrainConfig, "agc train", "").format_help().split())
    assert '"tiny" (a small model trained from scratch: minutes per run on a CPU)' in help_text
    assert "(default: tiny)" in help_text


def _validate(**fields) -> str | None:
    """``TrainConfig(group_size=1, **fields).validate()``'s error, or None."""
    try:
        TrainConfig(model="tiny", group_size=1, **fields).validate()
    except ValueError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("fields", [
    {"estimator": "gigpo"}, {"estimator": "grpo"}, {"estimator": "rloo"}, {"estimator": "salt"},
    {"estimator": "graphgpo"}, {"estimator": "hgpo"}, {"estimator": "tree_grpo"}, {"estimator": "empg"},
    {"estimator": "grpo", "estimator_params": {"convention": "verl-agent"}},
    {"estimator": "spa", "estimator_params": {"mode": "group"}},
])
def test_group_size_1_is_refused_for_an_estimator_that_compares_a_group(fields) -> None:
    """One trajectory per task group: a group-relative estimator's advantages would not depend on the outcome."""
    error = _validate(**fields)
    assert error is not None and error.startswith(f"estimator {fields['estimator']!r} compares the trajectories of "
                                                  "a task group, and with group_size=1 each task group plays one "
                                                  "trajectory")
    fix = "set group_size >= 2, or choose an estimator that credits a lone trajectory (with its default parameters: "
    assert fix in error and "spa, step_gae" in error.split(fix)[1]  # and any registered one that does


@pytest.mark.parametrize("fields", [
    {"estimator": "step_gae"}, {"estimator": "spa"},
    {"estimator": "empg", "estimator_params": {"base": "step_gae"}},
    {"estimator": "tree_grpo", "estimator_params": {"convention": "verl-agent"}},
    {"estimator": "gigpo", "rollout": "tree", "trees": 1},  # the fixed schedule grows 1 + L N leaves on one member
])
def test_group_size_1_stays_valid_where_a_lone_trajectory_is_credited(fields) -> None:
    assert _validate(**fields) is None


def test_the_entropy_tree_schedule_needs_a_free_member_to_fork_into() -> None:
    error = _validate(estimator="gigpo", rollout="tree", trees=1, tree_schedule="entropy")
    assert error is not None and "the entropy tree schedule has no free member to fork into" in error
    assert "set group_size >= 2 (or tree_schedule='fixed'" in error
