"""Credit probes: the step record, the ε-noisy entropy, the default ground truth and the probe's checks."""

from __future__ import annotations

import numpy as np
import pytest

import agentgym_credit  # noqa: F401  (registers the built-in families)
from agentgym_credit.envs.credit_probe import CreditProbe, ProbeStep, noisy_entropy, response_truth
from agentgym_credit.envs.spec import families
from agentgym_credit.records import Step, StepBatch, Trajectory


def _policy(env, epsilon, seed):
    return lambda obs, ids, infos: [ProbeStep("right", 0.0, 1.0) for _ in ids]


def _setting(env_kwargs):
    return "a corridor"


def test_the_entropy_of_the_noisy_choice() -> None:
    moves = ["up", "down", "left", "right"]
    # ε = 0.2, one optimal move: 0.8 + 0.05 on it, 0.05 on each other move
    expected = -(0.85 * np.log(0.85) + 3 * 0.05 * np.log(0.05))
    assert noisy_entropy(0.2, ["up"], moves) == pytest.approx(expected)
    assert noisy_entropy(0.0, ["up", "left"], moves) == pytest.approx(np.log(2))
    assert noisy_entropy(1.0, ["up"], moves) == pytest.approx(np.log(4))
    # a greedy choice outside the listed actions (ALFWorld's planner command not admissible) keeps its mass
    assert noisy_entropy(0.5, ["go"], ["a"]) == pytest.approx(np.log(2))


def test_the_default_ground_truth_is_the_one_each_response_carries() -> None:
    traj = Trajectory(group=0, steps=[Step("s0", "right", "s1"), Step("s1", "left", "s0")])
    batch = StepBatch.from_trajectories([traj])
    responses = [ProbeStep("right", 0.1, 1.0), ProbeStep("left", 0.2, -1.0)]
    gt = response_truth(batch, {}, responses)
    assert gt.dtype == float and gt.tolist() == [1.0, -1.0]
    assert np.isnan(ProbeStep("up", 0.0).gt)  # an oracle that does not know the truth leaves it out


def test_a_probe_defaults_to_no_options_and_the_plain_file_name() -> None:
    probe = CreditProbe(policy=_policy, truth="+1 for right, -1 for left", setting=_setting)
    assert probe.env_id is None and probe.info_keys == () and probe.add_arguments is None
    assert probe.env_kwargs(None) == {} and probe.variant({}) == ""
    assert probe.ground_truth is response_truth


@pytest.mark.parametrize("kwargs, message", [
    ({"truth": ""}, "truth must be one non-empty line"),
    ({"truth": "two\nlines"}, "truth must be one non-empty line"),
    ({"info_keys": "optimal_distance"}, "info_keys must be a tuple"),
])
def test_a_malformed_probe_is_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        CreditProbe(**{"policy": _policy, "truth": "+1 for right", "setting": _setting, **kwargs})


def test_the_builtin_probes() -> None:
    probes = {spec.name: spec.credit_probe for spec in families() if spec.credit_probe is not None}
    assert set(probes) == {"sokoban", "alfworld"}
    assert probes["sokoban"].info_keys == ("optimal_distance",)
    assert probes["sokoban"].setting({"reward": "sparse"}) == "6×6, 1 box, sparse reward"
    assert probes["sokoban"].variant({"reward": "shaped"}) == ""
    assert probes["sokoban"].variant({"reward": "sparse"}) == "sparse"
    assert probes["alfworld"].setting({"task_types": ["pick_and_place_simple"]}) == (
        "shipped train games: pick_and_place_simple")
    assert probes["alfworld"].setting({"task_types": None}) == "shipped train games"
