"""The sampler's lean decoding step: the logits of the model's own forward, with stacked products."""

from __future__ import annotations

import pytest
import torch
import transformers

from agentgym_credit.baselines import generation as generation_module
from agentgym_credit.baselines.decode_step import LlamaDecodeStep, lean_decode_step, supports_lean_decoding
from agentgym_credit.baselines.generation import HFGenerator
from agentgym_credit.baselines.kv_cache import reserved_cache
from agentgym_credit.baselines.policy import attach_lora, load_policy
from agentgym_credit.baselines.runtime import packed_linears, use_onednn_linears
from tests.baselines.decoding import decode_fixed_tokens

# float32 rounding: the stacked products compute the same dot products (bit-identical on the machines measured)
ROUNDING = {"rtol": 1e-5, "atol": 1e-5}


def _llama(**overrides):
    values = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, max_position_embeddings=256, pad_token_id=0, tie_word_embeddings=True)
    values.update(overrides)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**values)).eval()
    use_onednn_linears(model)
    return model


def _decode(model, rows, lean: bool, steps=10, leave_at=4):
    """The logits of every step (:func:`decode_fixed_tokens`) through the model's forward or the lean step."""
    return decode_fixed_tokens(model, rows, reserved_cache(model.config, steps), steps, leave_at,
                               LlamaDecodeStep if lean else None)[0]


ROWS = [list(range(10, 40)) + [7, 8], list(range(10, 40)) + [7], list(range(10, 40)) + [9, 9, 9],
        list(range(50, 70)) + [3], list(range(50, 70)) + [4, 5], list(range(71, 90))]


@pytest.mark.parametrize("kv_heads", [4, 2], ids=["mha", "gqa"])
def test_the_lean_step_gives_the_logits_of_the_models_forward(kv_heads):
    model = _llama(num_key_value_heads=kv_heads)
    assert supports_lean_decoding(model)
    want, got = _decode(model, ROWS, lean=False), _decode(model, ROWS, lean=True)
    assert len(got) == len(want) == 11
    for mine, theirs in zip(got, want, strict=True):
        torch.testing.assert_close(mine, theirs, **ROUNDING)


def test_the_tiny_policys_lean_step_gives_its_logits(cache_dir):
    model = load_policy("tiny", cache_dir=cache_dir).model.eval()
    rows = [list(range(10, 60)) + [7, 8], list(range(10, 60)) + [9], list(range(100, 140)) + [7]]
    for mine, theirs in zip(_decode(model, rows, lean=True), _decode(model, rows, lean=False), strict=True):
        torch.testing.assert_close(mine, theirs, **ROUNDING)


def test_models_the_step_does_not_compute_take_their_own_forward(cache_dir):
    assert not supports_lean_decoding(_llama(attention_bias=True))
    assert not supports_lean_decoding(transformers.LlamaForCausalLM(_llama().config))  # torch's own nn.Linear
    eager = _llama()
    eager.set_attn_implementation("eager")
    assert not supports_lean_decoding(eager)
    model = _llama()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not supports_lean_decoding(model)
    wrapped = _llama()  # as Accelerate's mixed precision wraps it: the autocast is inside the forward
    wrapped.forward = torch.autocast("cpu", dtype=torch.bfloat16)(wrapped.forward)
    assert not supports_lean_decoding(wrapped)
    hooked = _llama()
    hooked.register_forward_pre_hook(lambda module, args: None)
    assert not supports_lean_decoding(hooked)
    policy = load_policy("tiny", cache_dir=cache_dir)
    attach_lora(policy, 4)
    assert not supports_lean_decoding(policy.model)
    with pytest.raises(ValueError, match="LlamaDecodeStep needs"):
        LlamaDecodeStep(policy.model)


def test_the_sampler_draws_the_same_tokens_with_and_without_the_lean_step(cache_dir, monkeypatch):
    policy = load_policy("tiny", cache_dir=cache_dir)
    prompts = ["You are in a room. <action>", "You are in a room. <action>", "A box and a target."]
    calls = []
    step = LlamaDecodeStep.__call__
    monkeypatch.setattr(LlamaDecodeStep, "__call__", lambda self, *args: calls.append(1) or step(self, *args))
    lean = HFGenerator(policy, max_new_tokens=12, temperature=1.0).generate(prompts, seed=3)
    assert calls  # the lean step decoded
    monkeypatch.setattr(generation_module, "supports_lean_decoding", lambda model: False)
    plain = HFGenerator(policy, max_new_tokens=12, temperature=1.0).generate(prompts, seed=3)
    for a, b in zip(lean, plain, strict=True):
        assert a.response_ids == b.response_ids
        torch.testing.assert_close(torch.as_tensor(a.logprobs), torch.as_tensor(b.logprobs), **ROUNDING)
        assert a.entropy == pytest.approx(b.entropy, rel=1e-5)


def test_a_context_stacks_the_weights_once_and_again_after_they_changed():
    model = _llama()
    with torch.inference_mode(), packed_linears(model):
        first = lean_decode_step(model)
        assert lean_decode_step(model) is first
        model.model.layers[1].mlp.up_proj.weight.mul_(2.0)  # an optimizer step
        second = lean_decode_step(model)
        assert second is not first and lean_decode_step(model) is second
    with torch.inference_mode():
        assert lean_decode_step(model) is not lean_decode_step(model)  # outside a context nothing is kept
