"""The LLM trainer: learning on a fixed batch, advantages reaching the loss unchanged, CLI, checkpoints."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import agentgym_credit.baselines.trainer as trainer_mod
from agentgym_credit.baselines.config import TrainConfig
from agentgym_credit.baselines.losses import trajectory_weights
from agentgym_credit.baselines.policy import load_policy, response_logprobs
from agentgym_credit.baselines.train_cli import build_parser, main
from agentgym_credit.baselines.trainer import Trainer, train
from agentgym_credit.credit import compute_advantages
from tests.baselines.logged_rows import dr_grpo_matches

ESTIMATORS = {
    "grpo": {},
    "rloo": {},
    "gigpo": {"omega": 1.0, "gamma": 0.95},
    "salt": {"h": 2},
    "graphgpo": {"omega": "sokoban"},
    "step_gae": {"gamma": 0.99, "lam": 0.95},
    "spa": {"alpha": 1.0, "beta": 0.5},
}


def _mix_in_valid_actions(trainer: Trainer, seed: int = 0) -> None:
    """Replace half of the sampled responses' text by well-formed moves, so that returns differ.

    The random tiny model almost never writes a well-formed action; the token ids and log-probs of each
    step stay the model's own, only the executed text changes.
    """
    rng = np.random.default_rng(seed)
    real = trainer.generator.generate

    def generate(prompts, seed=None):
        out = real(prompts, seed=seed)
        for g in out:
            if rng.random() < 0.5:
                g.text = f"<think>go</think><action>{rng.choice(['up', 'down', 'left', 'right'])}</action>"
        return out

    trainer.generator.generate = generate


def _logprobs(trainer: Trainer, rollout) -> torch.Tensor:
    with torch.no_grad(), trainer.policy.autocast():
        fwd = response_logprobs(trainer.policy.model, rollout.prompt_ids, rollout.response_ids,
                                pad_id=trainer.policy.pad_id, temperature=trainer.temperature)
    return fwd.logprobs[fwd.mask]


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_updates_on_a_fixed_batch_decrease_the_loss_and_change_the_policy(precision, tiny_config):
    # bfloat16: autocast around each forward; an autocast context held across optimizer steps would keep
    # using its cached bf16 copies of the old weights, and the policy would not move
    trainer = Trainer(tiny_config(lr=3e-4, kl_coef=0.0, ppo_epochs=1, grad_accum=1, micro_batch_size=64,
                                  shuffle=False, clip_eps=10.0, precision=precision))
    assert trainer.policy.precision == precision
    rollout = trainer.rollout(0)
    # a fixed, non-degenerate advantage per step: half the steps good, half bad
    adv = np.where(np.arange(len(rollout)) % 2 == 0, 1.0, -1.0)
    params0 = [p.detach().clone() for p in trainer.policy.model.parameters()]
    logp0 = _logprobs(trainer, rollout)
    losses = [trainer.update(rollout, adv)["pg_loss"] for _ in range(6)]
    assert losses[-1] < losses[0] - 0.05, losses
    changed = [not torch.equal(a, b) for a, b in zip(params0, trainer.policy.model.parameters(), strict=True)]
    assert all(changed)
    logp1 = _logprobs(trainer, rollout)
    assert not torch.allclose(logp0, logp1)
    # the good steps became more likely, the bad ones less
    sign = torch.as_tensor(np.repeat(adv, [len(r) for r in rollout.response_ids]), dtype=torch.float32)
    assert float(((logp1 - logp0) * sign).mean()) > 0


CASES = [(name, params, {}) for name, params in ESTIMATORS.items()] + [
    ("spa", {"mode": "gae"}, {"progress_estimator": "lm"}),  # critic values + LM-head progress
    ("spa", {"mode": "group"}, {}),  # the critic-free variant, asked for
    ("hgpo", {"history_length": 2}, {}),
    ("empg", {"base": "gigpo", "zeta": 0.05}, {}),  # the sampler's entropy of each step
    ("grpo", {"entropy_modulation": {"k": 2.0}}, {}),
]


def _case_id(case: tuple) -> str:
    name, params, extra = case
    return name + ("-lm-gae" if extra else "-group" if params.get("mode") == "group" else
                   "-modulated" if "entropy_modulation" in params else "")


@pytest.mark.parametrize("name, params, extra", CASES, ids=[_case_id(c) for c in CASES])
def test_advantages_reach_the_loss_unchanged(name, params, extra, tiny_config, monkeypatch):
    trainer = Trainer(tiny_config(estimator=name, estimator_params=params, shuffle=False, micro_batch_size=3,
                                  env_kwargs={"max_steps": 4}, **extra))
    _mix_in_valid_actions(trainer)
    seen = []
    real = trainer_mod.policy_loss

    def spy(logp, old_logp, advantages, mask, **kwargs):
        seen.append((advantages.detach().clone(), mask.clone()))
        return real(logp, old_logp, advantages, mask, **kwargs)

    monkeypatch.setattr(trainer_mod, "policy_loss", spy)
    metrics = trainer.iterate(0)
    batch = trainer.last_batch
    if name == "step_gae" or (name == "spa" and params.get("mode") != "group"):
        assert batch.value is not None  # filled by the critic (spa: the paper's PPO + GAE unless mode=group)
        assert "value_loss" in metrics
    else:
        assert batch.value is None and "value_loss" not in metrics
    if name == "spa":
        assert batch.progress is not None  # filled by the progress estimator
        assert "progress_loss" in metrics
    assert batch.entropy is not None and np.all(batch.entropy > 0)  # the sampler's, recorded with every step
    expected = compute_advantages(batch, name, **params)
    assert np.abs(expected).sum() > 0  # a non-trivial signal, so that equality means something
    received = []
    for adv, mask in seen:
        for row in range(adv.shape[0]):
            values = adv[row][mask[row]]
            assert torch.all(values == values[0])  # one advantage per step, on every response token
            received.append(float(values[0]))
    assert len(received) == len(batch)
    np.testing.assert_allclose(received, expected.astype(np.float32), rtol=0, atol=0)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_step_ratio_and_lora_run(precision, tiny_config, tmp_path):
    trainer = Trainer(tiny_config(ratio_level="step", lora=4, kl_coef=0.01, lr=1e-3, precision=precision))
    base = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters() if not p.requires_grad}
    lora = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters() if p.requires_grad}
    assert lora and all("lora_" in n for n in lora)
    # bf16: the frozen base is stored in bf16 (no cast at every forward), the adapter trains in float32
    assert {p.dtype for p in base.values()} == {torch.float32 if precision == "float32" else torch.bfloat16}
    assert {p.dtype for p in lora.values()} == {torch.float32}
    metrics = trainer.iterate(0)
    assert np.isfinite(metrics["loss"]) and metrics["kl"] >= 0
    after = dict(trainer.policy.model.named_parameters())
    assert any(not torch.equal(lora[n], after[n]) for n in lora)
    # exporting merges the adapter in float32 and leaves the live base untouched, bit for bit
    exported = load_policy(str(trainer.save(tmp_path / "run", state=False) / "policy"))
    assert all(torch.equal(base[n], after[n]) for n in base)
    state = exported.model.state_dict()
    layers = [(n, m) for n, m in trainer.policy.model.named_modules() if hasattr(m, "get_delta_weight")]
    assert layers
    with torch.no_grad():
        for name, layer in layers:  # exported weight = base (upcast) + the adapter's delta, in float32
            key = name.replace("base_model.model.", "", 1) + ".weight"
            expected = layer.base_layer.weight.float() + layer.get_delta_weight("default").float()
            torch.testing.assert_close(state[key], expected)
    assert {v.dtype for v in state.values() if v.is_floating_point()} == {torch.float32}


def test_checkpoint_roundtrip(tiny_config, tmp_path):
    cfg = tiny_config(estimator="step_gae")
    trainer = Trainer(cfg)
    trainer.iterate(0)
    path = trainer.save(tmp_path / "ck")
    assert (path / "policy" / "config.json").exists() and (path / "trainer_state.pt").exists()
    fresh = Trainer(tiny_config(estimator="step_gae", seed=1, resume=str(path)))
    assert fresh.iteration == 1 and fresh.tasks_drawn == trainer.tasks_drawn == 2
    for a, b in zip(trainer.policy.model.parameters(), fresh.policy.model.parameters(), strict=True):
        assert torch.equal(a, b)
    torch.testing.assert_close(fresh.optimizer.state_dict()["state"][0]["exp_avg"],
                               trainer.optimizer.state_dict()["state"][0]["exp_avg"])
    for a, b in zip(trainer.critic.head.parameters(), fresh.critic.head.parameters(), strict=True):
        assert torch.equal(a, b)


def test_config_validation():
    with pytest.raises(ValueError, match="estimator"):
        TrainConfig(estimator="nope").validate()
    with pytest.raises(ValueError, match="ratio_level"):
        TrainConfig(ratio_level="sequence").validate()
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp16").validate()


def test_main_runs_and_writes_metrics(tmp_path, cache_dir, capsys):
    out = tmp_path / "run"
    rc = main(["--env", "Sokoban-Group-v0", "--estimator", "gigpo", "--model", "tiny", "--iters", "2",
               "--out-dir", str(out), "--cache-dir", str(cache_dir), "--groups", "2", "--group-size", "2",
               "--max-new-tokens", "8", "--env-kwarg", "max_steps=4", "--param", "omega=0.5", "--no-progress-bar"])
    assert rc == 0
    printed = capsys.readouterr().out.splitlines()  # a line per iteration, then where the files are
    assert [line.split(":")[0] for line in printed[:2]] == ["iteration 1/2", "iteration 2/2"]
    assert all("success" in line and "return" in line and "loss" in line for line in printed[:2])
    assert printed[-2:] == [f"metrics: {out / 'metrics.jsonl'}",
                            f"policy: {out / 'policy'} (agc eval --env Sokoban-Group-v0 --policy {out})"]
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iter"] for x in lines] == [0, 1]
    assert (out / "metrics.csv").read_text().startswith("iter,")
    config = json.loads((out / "config.json").read_text())
    assert config["estimator_params"] == {"omega": 0.5} and config["env_kwargs"] == {"max_steps": 4}
    assert (out / "policy" / "config.json").exists() and (out / "trainer_state.pt").exists()
    last = json.loads(lines[-1])
    for phase in ("generate_s", "env_s", "credit_s", "logprob_s", "update_s", "iteration_s"):
        assert last[phase] >= 0
    assert last["iteration_cpu_s"] > 0 and last["threads"] == torch.get_num_threads()  # what --num-threads 0 chose
    assert 0 < last["prefill_s"] < last["generate_s"] and last["decode_steps"] >= 1  # the sampler's split


@pytest.mark.parametrize("flags", [["--estimator", "empg", "--param", "base=gigpo"],
                                   ["--estimator", "grpo", "--param", 'entropy_modulation={"zeta": 0.05}']],
                         ids=["empg-over-gigpo", "grpo-entropy-modulation"])
def test_main_trains_with_entropy_modulated_credit(flags, tmp_path, cache_dir):
    out = tmp_path / "run"
    assert main([*flags, "--env", "Sokoban-Group-v0", "--model", "tiny", "--iters", "1", "--out-dir", str(out),
                 "--cache-dir", str(cache_dir), "--groups", "2", "--group-size", "2", "--max-new-tokens", "8",
                 "--env-kwarg", "max_steps=3", "--log-rollouts", "--no-save-state", "--no-progress-bar"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["estimator_params"] == ({"base": "gigpo"} if flags[1] == "empg" else
                                          {"entropy_modulation": {"zeta": 0.05}})  # --param values parsed as JSON
    rows = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert rows and all(r["entropy"] > 0 for r in rows)
    assert np.isfinite(json.loads((out / "metrics.jsonl").read_text())["adv_std"])


@pytest.mark.slow
def test_main_with_the_documented_command(tmp_path, cache_dir):
    out = tmp_path / "run"
    assert main(["--env", "Sokoban-Group-v0", "--estimator", "gigpo", "--model", "tiny", "--iters", "2",
                 "--out-dir", str(out), "--cache-dir", str(cache_dir)]) == 0
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2


def test_length_batches_partition_rows_by_length():
    from agentgym_credit.baselines.trainer import length_batches

    lengths = np.array([5, 50, 7, 48, 6, 49, 51, 8])
    batches = length_batches(lengths, 4, np.random.default_rng(0))
    assert sorted(np.concatenate(batches).tolist()) == list(range(8))
    assert sorted(sorted(lengths[b].tolist()) for b in batches) == [[5, 6, 7, 8], [48, 49, 50, 51]]


def test_identical_steps_share_a_forward_and_give_the_same_update(tiny_config, monkeypatch):
    trainer = Trainer(tiny_config(kl_coef=0.1, shuffle=False, micro_batch_size=64, grad_accum=1))
    rollout = trainer.rollout(0)
    batch = rollout.batch
    for r in range(len(rollout)):  # members of a group start alike: make their first responses identical too
        if batch.t[r] == 0:
            r0 = int(np.flatnonzero((batch.group == batch.group[r]) & (batch.t == 0))[0])
            rollout.response_ids[r] = list(rollout.response_ids[r0])
            rollout.old_logprobs[r] = rollout.old_logprobs[r0].copy()
    same = trainer_mod.duplicate_rows(rollout)
    assert len(np.unique(same)) < len(rollout)
    assert all(rollout.response_ids[r] == rollout.response_ids[same[r]] for r in range(len(rollout)))
    adv = np.linspace(-1.0, 1.0, len(rollout))
    with torch.no_grad():  # a policy that is no longer the reference: the reference's own pass runs (deduplicated)
        next(trainer.policy.model.parameters()).add_(1e-3)
    state = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    # plain SGD: the parameter change is the (clipped) gradient itself, with no Adam normalization of tiny entries
    trainer.optimizer = torch.optim.SGD(trainer.policy.model.parameters(), lr=1.0)
    forwarded = []
    real = trainer_mod.response_logprobs

    def counting(model, prompts, responses, **kwargs):
        forwarded.append(len(prompts))
        return real(model, prompts, responses, **kwargs)

    monkeypatch.setattr(trainer_mod, "response_logprobs", counting)
    shared = trainer.update(rollout, adv)
    assert sum(forwarded) == 2 * len(np.unique(same))  # reference pass + one micro-batch, distinct rows only
    after_shared = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    trainer.policy.model.load_state_dict(state)
    trainer.optimizer = torch.optim.SGD(trainer.policy.model.parameters(), lr=1.0)
    monkeypatch.setattr(trainer_mod, "duplicate_rows", lambda ro: np.arange(len(ro)))
    separate = trainer.update(rollout, adv)
    for key in ("loss", "pg_loss", "kl"):
        assert shared[key] == pytest.approx(separate[key], rel=1e-5, abs=1e-7), key
    for k, v in trainer.policy.model.state_dict().items():
        # a step is known only to the rounding of the float32 parameter it was added to (one ulp of the largest)
        ulp = torch.finfo(torch.float32).eps * max(float(state[k].abs().max()), 1e-3)
        torch.testing.assert_close(after_shared[k] - state[k], v - state[k], rtol=1e-4, atol=ulp)


def test_length_batches_keep_identical_rows_together():
    lengths = np.array([5, 5, 5, 5, 7, 7, 5, 5])
    same = np.array([0, 1, 0, 3, 4, 4, 1, 0])
    for rng in (None, *(np.random.default_rng(seed) for seed in range(5))):
        assert sorted(np.concatenate(trainer_mod.length_batches(lengths, 3, rng, same)).tolist()) == list(range(8))
        (order,) = trainer_mod.length_batches(lengths, 8, rng, same)  # one batch: the sorted order itself
        assert np.all(np.diff(lengths[order]) >= 0)
        keys = same[order].tolist()
        runs = [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
        assert len(runs) == len(set(keys))  # each group of identical rows is one contiguous run


def test_a_shuffled_micro_batch_gives_the_same_update_as_the_ordered_one(tiny_config, tmp_path):
    """One micro-batch of every row: its order (random with ``shuffle``) must not change the update.

    Catches a forward whose rows are in another order than the advantages and rollout log-probs.
    """
    updates = []
    for shuffle in (False, True):
        trainer = Trainer(tiny_config(kl_coef=0.1, shuffle=shuffle, micro_batch_size=256, grad_accum=1,
                                      out_dir=str(tmp_path / f"run-{shuffle}")))
        rollout = trainer.rollout(0)
        if not updates:
            first = rollout
        state = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
        trainer.optimizer = torch.optim.SGD(trainer.policy.model.parameters(), lr=1.0)
        adv = np.linspace(-1.0, 1.0, len(first))
        stats = trainer.update(first, adv)
        updates.append((stats, {k: v - state[k] for k, v in trainer.policy.model.state_dict().items()}))
    (ordered, d_ordered), (shuffled, d_shuffled) = updates
    for key in ("loss", "pg_loss", "kl"):
        assert shuffled[key] == pytest.approx(ordered[key], rel=1e-5, abs=1e-7), key
    assert any(float(v.abs().max()) > 0 for v in d_ordered.values())
    for k, v in d_ordered.items():
        torch.testing.assert_close(d_shuffled[k], v, rtol=1e-4, atol=1e-7)


def test_trajectory_mean_counts_each_trajectory_once_whatever_the_micro_batches(tiny_config, tmp_path):
    """loss_agg="trajectory-mean": the step weights are computed over each optimizer step's rows, so one
    step over many micro-batches gives the update of one micro-batch of every row; at ratio 1 the GRPO
    loss is -Σ w_s A_s = 0 (each group's episode advantages cancel), which per-token averaging misses."""
    rollout, updates = None, []
    for micro_batch_size, grad_accum in ((256, 1), (3, 100)):
        trainer = Trainer(tiny_config(estimator="grpo", kl_coef=0.0, loss_agg="trajectory-mean", shuffle=True,
                                      micro_batch_size=micro_batch_size, grad_accum=grad_accum, max_grad_norm=0.0,
                                      group_size=4, env_kwargs={"max_steps": 4, "max_solution_steps": 1},
                                      out_dir=str(tmp_path / f"run-{micro_batch_size}")))
        if rollout is None:
            _mix_in_valid_actions(trainer)
            rollout = trainer.rollout(0)
            batch = rollout.batch
            adv = compute_advantages(batch, "grpo")
            assert len(np.unique(batch.traj_length)) > 1 and np.abs(adv).sum() > 0  # uneven lengths, a signal
        state = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
        trainer.optimizer = torch.optim.SGD(trainer.policy.model.parameters(), lr=1.0)
        stats = trainer.update(rollout, adv)
        assert stats["optimizer_steps"] == 1.0
        updates.append((stats, {k: v - state[k] for k, v in trainer.policy.model.state_dict().items()}))
    (whole, d_whole), (split, d_split) = updates
    weights = trajectory_weights(batch.traj)
    assert float(weights @ adv) == pytest.approx(0.0, abs=1e-9)
    assert whole["pg_loss"] == pytest.approx(0.0, abs=1e-4)  # the sampler's and the trainer's log-probs agree to ~1e-6
    assert float(adv.mean()) < -0.02  # a per-step average would push the lost episodes' extra steps down
    assert any(float(v.abs().max()) > 0 for v in d_whole.values())
    for k, v in d_whole.items():
        torch.testing.assert_close(d_split[k], v, rtol=1e-3, atol=1e-6)
    with pytest.raises(ValueError, match="loss_agg"):
        tiny_config(loss_agg="sum").validate()


def test_parser_types_every_optional_field_from_its_annotation():
    args = build_parser().parse_args(
        ["--history-length", "2", "--invalid-penalty", "0.05", "--cache-dir", "/tmp/c", "--template", "sokoban"])
    assert args.history_length == 2 and isinstance(args.history_length, int)
    assert args.invalid_penalty == 0.05 and isinstance(args.invalid_penalty, float)
    assert args.cache_dir == "/tmp/c" and args.template == "sokoban"
    defaults = build_parser().parse_args([])
    assert defaults.history_length is None and defaults.invalid_penalty is None and defaults.resume is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--history-length", "two"])


def test_rollout_log_holds_every_step_with_the_advantage_it_was_trained_with(tiny_config):
    cfg = tiny_config(estimator="grpo", estimator_params={"norm": "none"}, iters=2, log_rollouts=True,
                      penalty_credit="row")
    history = train(cfg)
    rows = [json.loads(x) for x in (Path(cfg.out_dir) / "rollouts.jsonl").read_text().splitlines()]
    assert [r["iter"] for r in rows] == sorted(r["iter"] for r in rows) and {r["iter"] for r in rows} == {0, 1}
    for it, metrics in enumerate(history):
        mine = [r for r in rows if r["iter"] == it]
        assert len(mine) == round(metrics["mean_steps"] * cfg.groups * cfg.group_size)
        assert all(r["response"] and "#" in r["observation"] for r in mine)
        # Dr. GRPO with the penalty charged to its row: a row's advantage is its episode's return less its
        # own penalty, minus the mean over its group's episodes of their rows' mean score
        assert any(r["penalty"] > 0 for r in mine) and all(r["penalty"] == 0 for r in mine if r["valid"])
        assert dr_grpo_matches(mine)


def test_critic_steps_reach_the_critic(tiny_config):
    trainer = Trainer(tiny_config(estimator="step_gae", critic_steps=3))
    assert trainer.critic is not None and trainer.critic.steps == 3
    trainer.env.close()


def test_rollout_log_holds_the_critic_values_and_progress_spa_was_given(tiny_config):
    """spa's rows carry the value and progress its advantages came from: the GAE recursion holds on them."""
    from agentgym_credit.credit.spa import fused_reward
    from agentgym_credit.credit.step_gae import gae

    trainer = Trainer(tiny_config(estimator="spa", estimator_params={"gamma": 0.9, "lam": 0.8}))
    trainer.iterate(0)
    rows = trainer.last_transcript()
    batch = trainer.last_batch
    assert [r["value"] for r in rows] == pytest.approx(batch.value.tolist())
    assert [r["progress"] for r in rows] == pytest.approx(batch.progress.tolist())
    expect = gae(batch, fused_reward(batch), batch.value, 0.9, 0.8) - batch.row_penalty  # charged to its step
    assert [r["advantage"] for r in rows] == pytest.approx(expect.tolist(), abs=1e-9)
    trainer.env.close()
    plain = Trainer(tiny_config(estimator="grpo"))
    plain.iterate(0)
    assert not {"value", "progress"} & set(plain.last_transcript()[0])
    plain.env.close()


def test_every_rollout_counts_its_groups_without_filtering(tiny_config):
    from agentgym_credit.baselines.rollout import mixed_outcome_groups

    trainer = Trainer(tiny_config(estimator="grpo", groups=3, env_kwargs={"max_steps": 3, "max_solution_steps": 1}))
    _mix_in_valid_actions(trainer)
    for it in range(2):
        rollout = trainer.rollout(it)
        assert rollout.stats["rollouts"] == 1 and rollout.stats["kept_groups"] == 3
        assert rollout.stats["uniform_groups"] == 3 - len(mixed_outcome_groups(rollout.batch))
        assert trainer.tasks_drawn == 3 * (it + 1)
    trainer.env.close()


def test_filter_groups_keeps_only_groups_with_mixed_outcomes_and_plays_fresh_tasks(tiny_config):
    """DAPO's dynamic sampling: every kept group has a winner and a loser, the groups come from successive
    rollouts of fresh tasks, and the stats describe every episode played."""
    from agentgym_credit.baselines.rollout import mixed_outcome_groups

    cfg = tiny_config(estimator="grpo", groups=3, group_size=4, filter_groups=True, filter_max_rollouts=6,
                      env_kwargs={"max_steps": 3, "max_solution_steps": 1})
    trainer = Trainer(cfg)
    _mix_in_valid_actions(trainer)
    seeds: list[int] = []
    real = trainer_mod.collect_rollout

    def spy(env, generator, seed=None, on_step=None):
        seeds.append(seed)
        return real(env, generator, seed=seed, on_step=on_step)

    trainer_mod.collect_rollout = spy
    try:
        metrics = trainer.iterate(0)
    finally:
        trainer_mod.collect_rollout = real
    rollout, played = trainer.last_rollout, int(metrics["rollouts"])
    kept = rollout.batch.group_ids
    assert 1 <= len(kept) == metrics["kept_groups"] <= 3
    assert set(mixed_outcome_groups(rollout.batch)) == set(kept)  # every kept group: some won, some lost
    assert played == len(seeds) and (len(kept) == 3 or played == 6)  # stopped when full, or at the cap
    assert seeds == [cfg.seed * 1_000_003 + 3 * k for k in range(played)]  # fresh tasks each time
    assert trainer.tasks_drawn == 3 * played
    assert metrics["uniform_groups"] <= 3 * played - len(kept)
    assert len(rollout) == len(rollout.prompt_ids) == len(rollout.response_ids) == len(trainer.last_credit.advantages)
    assert metrics["optimizer_steps"] >= 1 and np.isfinite(metrics["loss"])
    # the next iteration goes on from the tasks already played
    seeds.clear()
    trainer_mod.collect_rollout = spy
    try:
        trainer.iterate(1)
    finally:
        trainer_mod.collect_rollout = real
    assert seeds[0] == cfg.seed * 1_000_003 + 3 * played
    trainer.env.close()


def test_filter_groups_without_a_mixed_group_skips_the_update(tiny_config):
    """The random tiny model never writes a move: every group loses together, nothing is kept, nothing
    changes, and the metrics say so."""
    trainer = Trainer(tiny_config(estimator="grpo", filter_groups=True, filter_max_rollouts=2))
    before = [p.detach().clone() for p in trainer.policy.model.parameters()]
    metrics = trainer.iterate(0)
    assert metrics["rollouts"] == 2 and metrics["kept_groups"] == 0 and metrics["uniform_groups"] == 4
    assert metrics["optimizer_steps"] == 0 and metrics["success_rate"] == 0.0 and metrics["mean_steps"] > 0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.policy.model.parameters(), strict=True))
    assert trainer.last_transcript() == [] and trainer.tasks_drawn == 4
    trainer.env.close()


def test_filter_groups_settings_are_checked():
    with pytest.raises(ValueError, match="fixed_tasks"):
        TrainConfig(filter_groups=True, fixed_tasks=True).validate()
    with pytest.raises(ValueError, match="group_size"):
        TrainConfig(filter_groups=True, group_size=1).validate()
    with pytest.raises(ValueError, match="filter_max_rollouts"):
        TrainConfig(filter_max_rollouts=0).validate()


def test_an_update_without_signal_leaves_the_weights_and_the_optimizer_alone(tiny_config):
    """All-zero advantages and no KL: no gradient, so no optimizer step (Adam's momentum from the previous
    update would otherwise keep moving the weights); with a KL term the update runs."""
    trainer = Trainer(tiny_config(estimator="grpo", kl_coef=0.0, lr=1e-3))
    rollout = trainer.rollout(0)
    signal = np.linspace(-1.0, 1.0, len(rollout))
    assert trainer.update(rollout, signal)["optimizer_steps"] >= 1
    weights = [p.detach().clone() for p in trainer.policy.model.parameters()]
    state = trainer.optimizer.state_dict()["state"][0]["step"].clone()
    stats = trainer.update(rollout, np.zeros(len(rollout)))
    assert stats["optimizer_steps"] == 0 and "loss" not in stats
    assert all(torch.equal(a, b) for a, b in zip(weights, trainer.policy.model.parameters(), strict=True))
    assert torch.equal(trainer.optimizer.state_dict()["state"][0]["step"], state)
    # what the skipped step would have done: Adam replays the earlier gradient's direction
    trainer.policy.model.train()
    for p in trainer.policy.model.parameters():
        p.grad = torch.zeros_like(p)
    trainer.optimizer.step()
    assert any(not torch.equal(a, b) for a, b in zip(weights, trainer.policy.model.parameters(), strict=True))
    trainer.env.close()
    with_kl = Trainer(tiny_config(estimator="grpo", kl_coef=0.01))
    other = with_kl.rollout(0)
    assert with_kl.update(other, np.zeros(len(other)))["optimizer_steps"] >= 1
    with_kl.env.close()


def test_old_logprobs_are_the_samplers_with_hf_and_recomputed_by_the_trained_model_with_vllm(tiny_config):
    trainer = Trainer(tiny_config(max_new_tokens=6))
    rollout = trainer.rollout(0)
    assert trainer.old_logprobs(rollout) is rollout.old_logprobs  # HF: the sampler's are the trainer's own
    sampled = [np.asarray(x, dtype=np.float64) for x in rollout.old_logprobs]
    rollout.old_logprobs[:] = [np.full_like(x, -9.0) for x in sampled]  # as if another engine had sampled them
    trainer.config.backend = "vllm"  # the vLLM path without vLLM: only which log-probs the ratio starts from
    recomputed = trainer.old_logprobs(rollout)
    assert len(recomputed) == len(rollout)
    for ours, theirs in zip(recomputed, sampled, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs, atol=1e-5)  # the model's own log-probs, not -9
    trainer.env.close()


def test_agc_train_rollout_tree_trains_each_step_once(tmp_path, cache_dir, monkeypatch):
    """``--rollout tree``: the update's rows are the tree batch's, one per agent step played (a shared prefix
    step is forwarded and trained once), within the step budget; the metrics count the leaves."""
    forwarded: list[int] = []
    real = trainer_mod.response_logprobs

    def counting(model, prompts, responses, **kwargs):
        if model.training:
            forwarded.append(len(prompts))
        return real(model, prompts, responses, **kwargs)

    monkeypatch.setattr(trainer_mod, "response_logprobs", counting)
    seen = []
    real_assign = Trainer.assign_credit
    monkeypatch.setattr(Trainer, "assign_credit", lambda self, rollout: seen.append(rollout) or real_assign(self, rollout))
    out = tmp_path / "run"
    assert main(["--env", "Sokoban-Group-v0", "--estimator", "tree_grpo", "--model", "tiny", "--iters", "1",
                 "--out-dir", str(out), "--cache-dir", str(cache_dir), "--groups", "2", "--group-size", "3",
                 "--rollout", "tree", "--trees", "2", "--expand-nodes", "2", "--expand-rounds", "0",
                 "--step-budget", "12", "--max-new-tokens", "8", "--env-kwarg", "max_steps=3",
                 "--micro-batch-size", "64", "--no-shuffle", "--param", "prefix=sum", "--no-progress-bar"]) == 0
    (rollout,) = seen
    batch = rollout.batch
    assert batch.is_tree and np.bincount(batch.group - batch.group.min()).max() <= 12
    metrics = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["steps"] == len(batch) and metrics["forks"] >= 1
    assert metrics["mean_steps"] == pytest.approx(batch.tree_paths().lengths.mean())
    assert sum(forwarded) == metrics["distinct_rows"] <= len(batch)  # no step forwarded once per path
    assert json.loads((out / "config.json").read_text())["rollout"] == "tree"


def test_tree_rollouts_with_the_entropy_schedule_and_trajectory_mean(tiny_config, monkeypatch):
    trainer = Trainer(tiny_config(estimator="gigpo", rollout="tree", tree_schedule="entropy", group_size=3,
                                  trees=2, entropy_margin=0.0, branch_children=1, loss_agg="trajectory-mean"))
    real = trainer.generator.generate

    def with_entropy(prompts, seed=None):  # each response's entropy: its mean negative log-prob
        out = real(prompts, seed=seed)
        for g in out:
            g.entropy = float(-np.mean(g.logprobs)) if len(g.logprobs) else 0.0
        return out

    monkeypatch.setattr(trainer.generator, "generate", with_entropy)
    try:
        metrics = trainer.iterate(0)
    finally:
        trainer.env.close()
    batch = trainer.last_batch
    assert batch.entropy is not None and metrics["forks"] >= 1 and batch.is_tree
    assert metrics["optimizer_steps"] >= 1 and np.isfinite(metrics["loss"])


def test_tree_rollout_settings_are_checked():
    with pytest.raises(ValueError, match="does not accept"):
        TrainConfig(rollout="tree", estimator="step_gae").validate()
    with pytest.raises(ValueError, match="exceeds group_size"):
        TrainConfig(rollout="tree", estimator="tree_grpo", trees=5, group_size=4).validate()
    with pytest.raises(ValueError, match="step_budget"):
        TrainConfig(rollout="tree", estimator="tree_grpo", expand_rounds=0).validate()
    with pytest.raises(ValueError, match="expand_nodes must be"):
        TrainConfig(rollout="tree", estimator="tree_grpo", expand_nodes=0).validate()
    with pytest.raises(ValueError, match="rollout"):
        TrainConfig(rollout="forest").validate()
    TrainConfig(rollout="tree", estimator="tree_grpo", step_budget=64, expand_rounds=0).validate()


def test_reference_logprobs_on_packed_weights_are_the_unpacked_forwards_bit_for_bit(tiny_config, monkeypatch):
    trainer = Trainer(tiny_config(max_new_tokens=6))
    rollout = trainer.rollout(0)
    packed = trainer.reference_logprobs(rollout)  # the reference's weights reordered for oneDNN, no gradient
    monkeypatch.setattr(trainer_mod, "packed_linears", lambda model: contextlib.nullcontext())
    dense = trainer.reference_logprobs(rollout)
    assert len(packed) == len(dense) == len(rollout)
    for ours, theirs, ids in zip(packed, dense, rollout.response_ids, strict=True):
        assert len(ours) == len(ids) and torch.equal(ours, theirs)
    trainer.env.close()


@pytest.mark.parametrize("lora", [0, 4])
def test_reference_log_probs_are_the_sampler_s_until_the_first_update(tiny_config, lora):
    """Until its first optimizer step the policy computes what the reference computes (full fine-tuning: its copy,
    checked weight by weight; LoRA: the base with an adapter whose lora_B is still zero), so the log-probs the
    rollout was sampled with are the reference's (no second forward); after it, the reference's own pass runs."""
    trainer = Trainer(tiny_config(max_new_tokens=6, lora=lora))
    rollout = trainer.rollout(0)
    assert trainer.policy_is_reference()
    behaviour = trainer.old_logprobs(rollout)
    taken = trainer.reference_logprobs(rollout, behaviour)
    computed = trainer.reference_logprobs(rollout)  # the reference's forward
    for ours, theirs, sampled in zip(taken, computed, behaviour, strict=True):
        assert torch.equal(ours, torch.as_tensor(sampled, dtype=torch.float32))
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-4)  # the same function: rounding apart
    trained = [p for p in trainer.policy.model.parameters() if p.requires_grad]
    with torch.no_grad():  # what the first update does: the policy leaves the reference
        trained[-1].add_(1e-3)
    assert not trainer.policy_is_reference()
    after = trainer.reference_logprobs(rollout, behaviour)
    for ours, theirs in zip(after, computed, strict=True):
        assert torch.equal(ours, theirs)
    trainer.env.close()
