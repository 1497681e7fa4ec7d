"""Token-by-token decoding of fixed tokens, the way the sampler's loop drives a model (the KV cache and decoding
step tests compare what it returns)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from agentgym_credit.baselines.policy import shared_prefix_inputs
from agentgym_credit.baselines.runtime import packed_linears


def decode_fixed_tokens(model: Any, rows: list[list[int]], cache: Any, steps: int, leave_at: int,
                        make_step: Callable[[Any], Callable[..., torch.Tensor]] | None = None,
                        ) -> tuple[list[torch.Tensor], list[int], int]:
    """Prefill ``rows`` with their clusters' shared prefixes into ``cache``, then feed fixed tokens one at a time
    (odd rows leave the batch at ``leave_at``) through the model's forward, or through ``make_step(model)`` (called
    as ``step(tokens, positions, cache, mask)``, inside :func:`packed_linears`).

    Returns:
        The logits of every step, the first layer's key buffer address after each step, and the positions the rows
        attend to in the end.
    """
    feed = torch.randint(5, model.config.vocab_size - 1, (len(rows), steps), generator=torch.Generator().manual_seed(1))
    logits, addresses = [], []
    with torch.inference_mode(), packed_linears(model):
        step = make_step(model) if make_step is not None else None
        ids, attn, position, cache = shared_prefix_inputs(model, rows, 0, [len(r) - 1 for r in rows], cache)
        logits.append(model(input_ids=ids, attention_mask=attn, position_ids=position, past_key_values=cache,
                            use_cache=True, logits_to_keep=1).logits[:, -1])
        position, live = position[:, -1:], torch.arange(len(rows))
        for k in range(steps):
            if k == leave_at:
                keep = torch.arange(0, len(live), 2)
                cache.batch_select_indices(keep)
                attn, position, live = attn[keep], position[keep], live[keep]
            attn = torch.cat([attn, attn.new_ones((len(live), 1))], dim=1)
            position = position + 1
            tokens = feed[live, k:k + 1]
            if step is not None:
                logits.append(step(tokens, position, cache, attn))
            else:
                logits.append(model(input_ids=tokens, attention_mask=attn, position_ids=position,
                                    past_key_values=cache, use_cache=True).logits[:, -1])
            addresses.append(cache.layers[0].keys.data_ptr())
    return logits, addresses, attn.shape[1]
