"""The last decoder layer restricted to the response positions: the log-probs and gradients of the whole layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from agentgym_credit.baselines.last_layer import last_decoder_layer, response_positions_only
from agentgym_credit.baselines.policy import attach_lora, load_policy, response_logprobs
from agentgym_credit.baselines.runtime import use_onednn_linears


def _llama(implementation="sdpa", kv_heads=2):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=kv_heads, pad_token_id=0,
                                      max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(config)
    model.set_attn_implementation(implementation)
    use_onednn_linears(model)
    return model


def _rows(seed, count=5, shared=24):
    """Prompts sharing ``shared`` tokens (the shared-prefix path) with tails and responses of uneven lengths."""
    rng = np.random.default_rng(seed)
    head = list(rng.integers(3, 90, shared))
    prompts = [head + list(rng.integers(3, 90, rng.integers(1, 12))) for _ in range(count)]
    responses = [list(rng.integers(3, 90, rng.integers(1, 9))) for _ in range(count)]
    return prompts, responses


def _scored(model, prompts, responses, restrict, **kwargs):
    """Log-probs of the responses and the gradient of their sum with respect to every trained parameter."""
    model.zero_grad(set_to_none=True)
    forward = response_logprobs(model, prompts, responses, pad_id=0, temperature=0.7, restrict_last_layer=restrict,
                                **kwargs)
    forward.logprobs.sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return forward, grads


def _assert_same(model, prompts, responses, **kwargs):
    whole, g_whole = _scored(model, prompts, responses, restrict=False, **kwargs)
    part, g_part = _scored(model, prompts, responses, restrict=True, **kwargs)
    assert torch.equal(part.mask, whole.mask)
    torch.testing.assert_close(part.logprobs, whole.logprobs, rtol=1e-5, atol=1e-5)
    assert g_part.keys() == g_whole.keys() and g_part
    for name, grad in g_whole.items():
        torch.testing.assert_close(g_part[name], grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("share_prefix", [True, False], ids=["shared-prefix", "whole-rows"])
def test_the_restricted_layer_gives_the_log_probs_and_gradients_of_the_whole_one(implementation, share_prefix):
    model = _llama(implementation)
    prompts, responses = _rows(0)
    _assert_same(model, prompts, responses, share_prefix=share_prefix)


def test_one_unpadded_row_without_a_mask_sees_only_earlier_positions():
    model = _llama()
    prompts, responses = _rows(1, count=1)  # no padding, no cache: Hugging Face passes no mask (is_causal)
    _assert_same(model, prompts, responses, share_prefix=False)


def test_the_tiny_policy_with_a_lora_adapter(cache_dir):
    policy = load_policy("tiny", cache_dir=cache_dir)
    attach_lora(policy, 4)
    assert last_decoder_layer(policy.model) is not None
    prompts, responses = _rows(2, count=4, shared=40)
    _assert_same(policy.model, prompts, responses)


def test_the_layer_computes_fewer_positions_and_is_put_back():
    model = _llama()
    layer = model.model.layers[-1]
    seen = []
    handle = layer.mlp.register_forward_hook(lambda module, args, out: seen.append(args[0].shape[1]))
    prompts, responses = _rows(3, count=3)
    _scored(model, prompts, responses, restrict=True, share_prefix=False)
    _scored(model, prompts, responses, restrict=False, share_prefix=False)
    handle.remove()
    width = max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    assert seen == [max(len(r) for r in responses) + 1, width]
    assert "forward" not in vars(layer)  # the class's forward again
    hooked = _llama()  # a hook would see fewer positions; a forward replaced on the instance would be lost
    hooked.model.layers[-1].register_forward_hook(lambda module, args, out: None)
    assert last_decoder_layer(hooked) is None
    replaced = _llama()
    last = replaced.model.layers[-1]
    last.forward = last.forward
    assert last_decoder_layer(replaced) is None
    other = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    assert last_decoder_layer(other) is None
    with response_positions_only(other, 3) as restricted:
        assert not restricted
