"""TRL's GRPOTrainer on a group env with per-step advantages from an estimator (tiny model, CPU)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("trl")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from agentgym_credit.baselines.policy import load_policy  # noqa: E402
from agentgym_credit.credit import assign_credit  # noqa: E402
from agentgym_credit.integrations.trl import (  # noqa: E402
    StepCreditGRPOTrainer,
    rollout_to_samples,
    seed_dataset,
    step_credit_config,
)
from tests.baselines.conftest import _one_thread  # noqa: E402, F401  (one torch thread, autouse)


def _trainer(tmp_path, estimator="gigpo", estimator_params=None, group_size=2, tree=None, **config):
    policy = load_policy("tiny", cache_dir=tmp_path / "cache", seed=0)
    config = {"max_steps": 2, **config}
    args = step_credit_config(output_dir=str(tmp_path / "out"), max_completion_length=8, learning_rate=1e-3, seed=0,
                              **config)
    return policy, StepCreditGRPOTrainer(
        model=policy.model, processing_class=policy.tokenizer, args=args, train_dataset=seed_dataset(4),
        env_id="Sokoban-Group-v0", groups=2, group_size=group_size, estimator=estimator,
        estimator_params=estimator_params, env_kwargs={"max_steps": 3}, tree=tree,
    )


def _train_two_updates(trainer):
    try:
        result = trainer.train()
    finally:
        trainer.close()
    assert trainer.state.global_step == 2 and np.isfinite(result.training_loss)


def _spy(trainer):
    seen = []
    original = trainer._generate_and_score_completions

    def spy(inputs):
        out = original(inputs)
        seen.append((trainer.last_rollout, trainer.last_credit, out))
        return out

    trainer._generate_and_score_completions = spy
    return seen


def test_trl_trains_on_steps_with_estimator_advantages(tmp_path):
    policy, trainer = _trainer(tmp_path, gradient_accumulation_steps=2, steps_per_generation=2)
    before = [p.detach().clone() for p in policy.model.parameters()]
    seen = _spy(trainer)
    _train_two_updates(trainer)
    assert len(seen) == 2, "one rollout per optimizer update"
    for rollout, _credit, out in seen:
        n = len(rollout)
        assert n > 0 and out["advantages"].shape[0] == n + n % 2, "one sample per step (+ padding to 2 chunks)"
        # the advantages TRL trains on are the estimator's, not TRL's group normalisation
        expected = assign_credit(rollout.batch, "gigpo").advantages
        np.testing.assert_allclose(out["advantages"][:n].numpy(), expected, rtol=1e-6, atol=1e-6)
        assert out["completion_mask"][n:].sum() == 0
        assert [len(r) for r in rollout.response_ids] == out["completion_mask"][:n].sum(1).tolist()
    assert any(np.abs(c.advantages).sum() > 0 for _, c, _ in seen), "the test needs non-zero credit"
    changed = sum(not torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True))
    assert changed > 0, "TRL's optimizer updated the model"
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"env/success_rate", "env/steps_per_rollout", "credit/advantage_abs_mean"} <= logged


def test_padding_rows_carry_no_loss():
    from agentgym_credit.baselines.rollout import Rollout
    from agentgym_credit.credit.registry import Credit
    from agentgym_credit.records import Step, StepBatch, Trajectory

    batch = StepBatch.from_trajectories([Trajectory(0, [Step("s", "a", "t", 1.0)], True),
                                         Trajectory(0, [Step("s", "b", "u", 0.0)], False),
                                         Trajectory(0, [Step("s", "c", "v", 0.0)], False)])
    rollout = Rollout(batch, [[5, 6], [7], [8, 9, 10]], [[1], [2, 3], [4]], [np.zeros(1)] * 3, ["a", "b", "c"])
    credit = Credit(np.array([1.0, -0.5, -0.5]), np.zeros(3))
    out = rollout_to_samples(rollout, credit, pad_id=0, num_chunks=4)
    assert out["prompt_ids"].tolist() == [[0, 5, 6], [0, 0, 7], [8, 9, 10], [0, 0, 0]]
    assert out["completion_mask"].tolist() == [[1, 0], [1, 1], [1, 0], [0, 0]]
    assert out["advantages"].tolist() == [1.0, -0.5, -0.5, 0.0]


def _forward_entropy(model, prompt_ids, response_ids, temperature):
    """The mean token entropy of softmax(z / T) over a response, from one plain forward of prompt + response."""
    ids = torch.tensor([list(prompt_ids) + list(response_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1: -1].float() / temperature
    return float(torch.distributions.Categorical(logits=logits).entropy().mean())


@pytest.mark.parametrize("estimator, params", [("empg", {"base": "gigpo"}),
                                               ("grpo", {"entropy_modulation": {"zeta": 0.05}})],
                         ids=["empg-over-gigpo", "grpo-entropy-modulation"])
def test_trl_trains_with_entropy_modulated_credit(tmp_path, estimator, params):
    policy, trainer = _trainer(tmp_path, estimator=estimator, estimator_params=params, max_steps=1,
                               temperature=0.8)
    seen = []
    original = trainer._generate_and_score_completions

    def spy(inputs):
        before = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
        out = original(inputs)
        seen.append((trainer.last_rollout, out, before))
        return out

    trainer._generate_and_score_completions = spy
    try:
        trainer.train()
    finally:
        trainer.close()
    (rollout, out, weights), = seen
    batch, n = rollout.batch, len(rollout)
    assert batch.entropy is not None and np.all(batch.entropy > 0)
    # each step's entropy is that of TRL's sampling distribution (T = 0.8) over the step's response
    sampler = load_policy("tiny", cache_dir=tmp_path / "cache", seed=0).model.eval()
    sampler.load_state_dict(weights)
    rows = range(0, n, max(1, n // 6))
    expected = [_forward_entropy(sampler, rollout.prompt_ids[i], rollout.response_ids[i], 0.8) for i in rows]
    np.testing.assert_allclose(batch.entropy[list(rows)], expected, atol=1e-4, rtol=0)
    credit = assign_credit(batch, estimator, **params)  # the advantages TRL trains on are EMPG's
    np.testing.assert_allclose(out["advantages"][:n].numpy(), credit.advantages, rtol=1e-6, atol=1e-6)
    assert np.abs(credit.advantages).sum() > 0
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert "env/step_entropy_mean" in logged


def test_estimators_needing_a_critic_and_off_policy_configs_are_refused(tmp_path):
    with pytest.raises(ValueError, match="value"):
        _trainer(tmp_path, estimator="step_gae")
    with pytest.raises(ValueError, match="progress"):
        _trainer(tmp_path, estimator="spa", estimator_params={"mode": "group"})
    with pytest.raises(ValueError, match="on-policy"):
        _trainer(tmp_path, num_iterations=2)


def test_trl_trains_tree_rollouts_one_sample_per_step(tmp_path):
    from agentgym_credit.baselines.tree_rollout import TreeSchedule

    tree = TreeSchedule(trees=2, expand=2, rounds=1, budget=12)
    policy, trainer = _trainer(tmp_path, estimator="tree_grpo", group_size=3, tree=tree)
    seen = _spy(trainer)
    _train_two_updates(trainer)
    for rollout, _credit, out in seen:
        batch, n = rollout.batch, len(rollout)
        assert batch.is_tree and out["advantages"].shape[0] == n == rollout.stats["steps"]
        assert np.bincount(batch.group - batch.group.min()).max() <= tree.budget
        assert n < batch.tree_paths().lengths.sum() or np.all(batch.t[batch.parent != batch.traj] == 0)
        np.testing.assert_allclose(out["advantages"].numpy(), assign_credit(batch, "tree_grpo").advantages,
                                   rtol=1e-6, atol=1e-6)


def test_tree_schedules_a_group_cannot_hold_are_refused(tmp_path):
    from agentgym_credit.baselines.tree_rollout import TreeSchedule

    with pytest.raises(ValueError, match="exceeds group_size"):
        _trainer(tmp_path, estimator="tree_grpo", tree=TreeSchedule(trees=3))
    with pytest.raises(ValueError, match="schedule must be one of"):
        _trainer(tmp_path, estimator="tree_grpo", tree=TreeSchedule(schedule="beam"))
