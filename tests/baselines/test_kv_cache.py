"""The in-place KV cache: the logits of Hugging Face's concatenating cache, with less copying."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import DynamicCache

from agentgym_credit.baselines.kv_cache import ReservedLayer, reserved_cache
from agentgym_credit.baselines.policy import load_policy
from tests.baselines.decoding import decode_fixed_tokens


def test_reserved_cache_gives_the_logits_of_the_concatenating_cache(cache_dir):
    model = load_policy("tiny", cache_dir=cache_dir).model.eval()
    # two groups of three members (shared task prefix per group, one member's prompt longer) and a stray row
    group_a, group_b = list(range(10, 60)), list(range(100, 140))
    rows = [group_a + [7, 8], group_a + [7, 8], group_a + [9], group_b + [7], group_b + [7, 8, 9], list(range(200, 230))]
    reference, _, _ = decode_fixed_tokens(model, rows, DynamicCache(config=model.config), steps=12, leave_at=5)
    cache = reserved_cache(model.config, reserve=16)
    assert all(type(layer) is ReservedLayer for layer in cache.layers)
    mine, addresses, width = decode_fixed_tokens(model, rows, cache, steps=12, leave_at=5)
    assert len(mine) == len(reference) == 13
    for got, want in zip(mine, reference, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    # after the rows left (a new buffer of fewer rows), the remaining steps wrote into the same buffer
    assert len(set(addresses[5:])) == 1
    assert cache.get_seq_length() == width  # the filled part only, not the spare room


def test_reserved_layer_grows_when_full_and_after_an_inherited_method_replaced_its_tensors():
    layer = ReservedLayer(reserve=2)
    key, value = torch.randn(3, 2, 4, 8), torch.randn(3, 2, 4, 5)  # value heads of another size
    keys, values = layer.update(key, value)
    torch.testing.assert_close(keys, key)
    torch.testing.assert_close(values, value)
    first = layer.keys.data_ptr()
    for _ in range(2):  # within the reserve: written in place
        layer.update(torch.randn(3, 2, 1, 8), torch.randn(3, 2, 1, 5))
        assert layer.keys.data_ptr() == first
    extra_key, extra_value = torch.randn(3, 2, 1, 8), torch.randn(3, 2, 1, 5)
    keys, values = layer.update(extra_key, extra_value)  # full: a new buffer holding everything
    assert layer.keys.data_ptr() != first and keys.shape == (3, 2, 7, 8) and values.shape == (3, 2, 7, 5)
    torch.testing.assert_close(keys[..., :4, :], key)
    torch.testing.assert_close(values[..., -1:, :], extra_value)
    layer.crop(-3)  # DynamicLayer's crop replaces the views; the next update adopts the cropped states
    keys, _ = layer.update(extra_key, extra_value)
    assert keys.shape[-2] == 5
    torch.testing.assert_close(keys[..., :4, :], key)
    torch.testing.assert_close(keys[..., 4:, :], extra_key)
    layer.batch_repeat_interleave(2)
    layer.batch_select_indices(torch.tensor([5, 0]))
    torch.testing.assert_close(layer.keys[1, ..., :4, :], key[0])
    torch.testing.assert_close(layer.keys[0, ..., :4, :], key[2])
    with pytest.raises(ValueError, match="reserve"):
        ReservedLayer(reserve=0)


def test_sampler_draws_the_same_tokens_with_either_cache(cache_dir, monkeypatch):
    from agentgym_credit.baselines import kv_cache
    from agentgym_credit.baselines.generation import HFGenerator

    policy = load_policy("tiny", cache_dir=cache_dir)
    prompts = ["Solve the room.\n#####\n#P.$#\n#####"] * 3 + ["Solve the room.\n#####\n#.P$#\n#####", "Find it."]
    generator = HFGenerator(policy, max_new_tokens=24, temperature=1.0)
    reserved = generator.generate(prompts, seed=3)
    monkeypatch.setattr(kv_cache, "reserved_cache", lambda config, reserve: DynamicCache(config=config))
    concatenating = generator.generate(prompts, seed=3)
    assert [g.response_ids for g in reserved] == [g.response_ids for g in concatenating]
    for a, b in zip(reserved, concatenating, strict=True):
        np.testing.assert_array_equal(a.logprobs, b.logprobs)
