"""The static-cache sampler: the same tokens and log-probabilities as the dynamic one (CPU, eager steps), and on
CUDA the step replayed as a graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentgym_credit.baselines.generation import HFGenerator
from agentgym_credit.baselines.policy import attach_lora, load_policy, response_logprobs
from agentgym_credit.baselines.static_decode import LENGTH_BUCKET, StaticDecoder, supports_static_decoding

PROMPTS = [
    "You are playing Sokoban. <action>left</action> Board:\n#####\n#@ $.#\n#####",
    "Task: push the box onto the target.",
    "Hello there",
] * 3


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return load_policy("tiny", cache_dir=tmp_path_factory.mktemp("cache"))


def test_greedy_tokens_and_logprobs_match_the_dynamic_sampler(policy):
    dynamic = HFGenerator(policy, max_new_tokens=20, temperature=0.0, decoder="dynamic").generate(PROMPTS)
    static_gen = HFGenerator(policy, max_new_tokens=20, temperature=0.0, decoder="static")
    static = static_gen.generate(PROMPTS)
    for a, b in zip(dynamic, static, strict=True):
        assert a.response_ids == b.response_ids
        assert a.text == b.text
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5, rtol=0)
    # no stop: 19 steps after the first token
    assert static_gen.static.stats["eager_steps"] == 19 and static_gen.static.stats["graphs_captured"] == 0
    assert static_gen.stats["decode_steps"] == static_gen.static.steps == 19


def test_sampled_logprobs_are_the_trainers_recomputation(policy):
    out = HFGenerator(policy, max_new_tokens=12, temperature=0.7, decoder="static").generate(PROMPTS, seed=4)
    with torch.no_grad():
        forward = response_logprobs(policy.model, [g.prompt_ids for g in out], [g.response_ids for g in out],
                                    pad_id=policy.pad_id, temperature=0.7)
    for i, g in enumerate(out):
        np.testing.assert_allclose(forward.logprobs[i][forward.mask[i]].double().numpy(), g.logprobs, atol=1e-5)
    again = HFGenerator(policy, max_new_tokens=12, temperature=0.7, decoder="static").generate(PROMPTS, seed=4)
    assert [g.response_ids for g in again] == [g.response_ids for g in out]  # a seed fixes the samples


def _forward_entropy(policy, gens, temperature: float) -> list[float]:
    """Each response's mean token entropy of softmax(z / T), from one plain forward of prompt + response."""
    out = []
    with torch.no_grad():
        for g in gens:
            ids = torch.tensor([g.prompt_ids + g.response_ids])
            logits = policy.model(input_ids=ids).logits[0, len(g.prompt_ids) - 1: -1].float() / temperature
            out.append(float(torch.distributions.Categorical(logits=logits).entropy().mean()))
    return out


@pytest.mark.parametrize("decoder", ["dynamic", "static"])
def test_each_response_carries_its_mean_token_entropy(policy, decoder):
    out = HFGenerator(policy, max_new_tokens=12, temperature=0.7, decoder=decoder).generate(PROMPTS, seed=4)
    entropy = [g.entropy for g in out]
    assert all(h is not None and h > 0 for h in entropy)
    np.testing.assert_allclose(entropy, _forward_entropy(policy, out, 0.7), atol=1e-4, rtol=0)
    greedy = {d: HFGenerator(policy, max_new_tokens=12, temperature=0.0, decoder=d).generate(PROMPTS)
              for d in ("dynamic", "static")}  # T = 0: the entropy of softmax(z), as the trainer's log-probs
    np.testing.assert_allclose([g.entropy for g in greedy["static"]], [g.entropy for g in greedy["dynamic"]],
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose([g.entropy for g in greedy[decoder]], _forward_entropy(policy, greedy[decoder], 1.0),
                               atol=1e-4, rtol=0)


def test_stop_strings_and_budget_end_rows(policy):
    gen = HFGenerator(policy, max_new_tokens=6, temperature=1.0, decoder="static", stop=("e",))
    out = gen.generate(PROMPTS, seed=0)
    for g in out:
        assert 1 <= len(g.response_ids) <= 6
        assert len(g.logprobs) == len(g.response_ids)
        finished_early = len(g.response_ids) < 6
        assert not finished_early or g.response_ids[-1] == policy.eos_id or gen.matcher.done(g.response_ids)


def test_buffers_are_reused_across_calls_of_one_shape_bucket(policy):
    gen = HFGenerator(policy, max_new_tokens=8, temperature=1.0, decoder="static")
    gen.generate(PROMPTS[:3], seed=0)
    gen.generate(PROMPTS[:4], seed=1)  # 3 and 4 rows round up to the same batch of 4
    assert len(gen.static._buffers) == 1
    (_, batch, length, responses), = gen.static._buffers
    assert batch == 4 and length % LENGTH_BUCKET == 0 and responses == 7


def test_a_lora_adapter_attached_after_the_generator_is_used(tmp_path):
    policy = load_policy("tiny", cache_dir=tmp_path)
    gen = HFGenerator(policy, max_new_tokens=6, temperature=0.0, decoder="static")
    attach_lora(policy, 4)
    with torch.no_grad():  # a non-zero adapter changes the logits
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)
    static = gen.generate(PROMPTS[:3])
    dynamic = HFGenerator(policy, max_new_tokens=6, temperature=0.0, decoder="dynamic").generate(PROMPTS[:3])
    assert [g.response_ids for g in static] == [g.response_ids for g in dynamic]
    assert gen.static.model is policy.model


def test_unsupported_attention_is_refused_and_auto_falls_back(policy, monkeypatch):
    monkeypatch.setattr(policy.model.config, "_attn_implementation", "flash_attention_2")
    assert not supports_static_decoding(policy.model)
    with pytest.raises(ValueError, match="dynamic sampler"):
        StaticDecoder(policy.model, 1.0)
    assert HFGenerator(policy, decoder="auto").static is None
    with pytest.raises(ValueError, match="decoder must be one of"):
        HFGenerator(policy, decoder="graph")


def test_auto_is_dynamic_on_the_cpu(policy):
    assert HFGenerator(policy, decoder="auto").static is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graph_replays_give_the_eager_tokens(tmp_path):
    policy = load_policy("tiny", cache_dir=tmp_path, device="cuda")
    gen = HFGenerator(policy, max_new_tokens=16, temperature=0.0, decoder="auto")
    assert gen.static is not None
    graphed = gen.generate(PROMPTS)
    assert gen.static.stats["graph_replays"] > 0 and gen.static.capture_error is None
    eager = HFGenerator(policy, max_new_tokens=16, temperature=0.0, decoder="dynamic").generate(PROMPTS)
    assert [g.response_ids for g in graphed] == [g.response_ids for g in eager]


@pytest.mark.parametrize("check_every", [1, 3, 50])
def test_how_often_rows_are_checked_does_not_change_the_result(policy, check_every):
    gen = HFGenerator(policy, max_new_tokens=10, temperature=0.0, decoder="static", stop=("e", "a"))
    gen.static.check_every = check_every
    greedy = HFGenerator(policy, max_new_tokens=10, temperature=0.0, decoder="dynamic", stop=("e", "a"))
    out, expected = gen.generate(PROMPTS), greedy.generate(PROMPTS)
    assert [g.response_ids for g in out] == [g.response_ids for g in expected]
    for a, b in zip(out, expected, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5, rtol=0)
        assert a.entropy == pytest.approx(b.entropy, abs=1e-5)  # the rows' mean token entropy, cut with them
