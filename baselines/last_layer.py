"""The last decoder layer computed only at the positions whose logits are read.

When the trainer scores a step record (:func:`~agentgym_credit.baselines.policy.response_logprobs`), only the
positions from the last prompt token on produce logits. Every layer but the last must still run at every position
(the next layer's keys and values depend on it), but in the last layer a prompt position contributes only its key
and value: its query, its attention output, ``o_proj``, the MLP and the final norm are never read. For the tiny
policy (6 layers) that is about 9 % of the products of a forward over a Sokoban step, in the update's forward and
backward and in the reference log-probabilities.

:func:`response_positions_only` computes the last layer of a Llama model as Hugging Face's
``LlamaDecoderLayer`` does — :math:`h' = h + W_o \\operatorname{attn}(q, K, V)`,
:math:`h'' = h' + \\operatorname{mlp}(\\operatorname{rms}(h'))` with the model's own modules, rotary embedding and
attention function — with the queries, and everything after the attention, restricted to the last ``keep``
positions; it returns the hidden states of those positions only, which the head then reads. The log-probabilities
and gradients agree with the full layer's to float32 rounding (``tests/baselines/test_last_layer.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .runtime import plain_forward

__all__ = ["last_decoder_layer", "response_positions_only"]

_MASKS = ("sdpa", "eager")


def last_decoder_layer(model: Any) -> Any | None:
    """The last decoder layer of ``model`` (a peft wrapper looked through) where :func:`response_positions_only`
    can restrict it: a ``LlamaDecoderLayer`` with SDPA or eager attention that runs its class's forward without
    hooks (:func:`~agentgym_credit.baselines.runtime.plain_forward`: a replaced forward would be lost, a hook would
    see fewer positions); None otherwise."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers = getattr(getattr(base, "model", None), "layers", None)
    if not layers or type(layers[-1]) is not LlamaDecoderLayer or not plain_forward(layers[-1]):
        return None
    if getattr(base.config, "_attn_implementation", None) not in _MASKS:
        return None
    return layers[-1]


def _causal(rows: int, keep: int, width: int, kind: str, like: torch.Tensor) -> torch.Tensor:
    """The mask of the last ``keep`` queries over ``width`` keys, each seeing the keys up to its own position."""
    allowed = torch.ones(keep, width, dtype=torch.bool, device=like.device).tril(diagonal=width - keep)
    allowed = allowed.expand(rows, 1, keep, width)
    if kind == "sdpa":
        return allowed
    return torch.zeros(allowed.shape, dtype=like.dtype, device=like.device).masked_fill(
        ~allowed, torch.finfo(like.dtype).min)


def _restricted_forward(layer: Any, keep: int) -> Any:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.llama.modeling_llama import eager_attention_forward, rotate_half

    attention = layer.self_attn

    def forward(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, past_key_values: Any = None, use_cache: bool | None = False,
                position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None, **kwargs: Any) -> torch.Tensor:
        rows, width = hidden_states.shape[:2]
        tail = min(keep, width)
        normed = layer.input_layernorm(hidden_states)
        head_dim = attention.head_dim
        query = attention.q_proj(normed[:, -tail:]).view(rows, tail, -1, head_dim).transpose(1, 2)
        key = attention.k_proj(normed).view(rows, width, -1, head_dim).transpose(1, 2)
        value = attention.v_proj(normed).view(rows, width, -1, head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # apply_rotary_pos_emb's arithmetic, per position
        query = (query * cos[:, :, -tail:]) + (rotate_half(query) * sin[:, :, -tail:])
        key = (key * cos) + (rotate_half(key) * sin)
        if past_key_values is not None:
            key, value = past_key_values.update(key, value, attention.layer_idx)
        kind = attention.config._attn_implementation
        if attention_mask is None:
            mask = _causal(rows, tail, key.shape[-2], kind, query)
        else:
            mask = attention_mask[:, :, -tail:, :]
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(kind, eager_attention_forward)
        out, _ = attend(attention, query, key, value, mask,
                        dropout=0.0 if not attention.training else attention.attention_dropout,
                        scaling=attention.scaling, **kwargs)
        out = attention.o_proj(out.reshape(rows, tail, -1).contiguous())
        hidden = hidden_states[:, -tail:] + out
        return hidden + layer.mlp(layer.post_attention_layernorm(hidden))

    return forward


@contextlib.contextmanager
def response_positions_only(model: Any, keep: int) -> Iterator[bool]:
    """Within: ``model``'s last decoder layer runs its queries and everything after them at the last ``keep``
    positions only, and returns those positions' hidden states (the model's logits are then those of the last
    ``keep`` positions: call it with ``logits_to_keep=keep``). Yields whether the layer was restricted (False for
    models :func:`last_decoder_layer` does not know; they run whole). Not for callers that read the hidden states of
    other positions."""
    layer = last_decoder_layer(model)
    if layer is None:
        yield False
        return
    layer.forward = _restricted_forward(layer, keep)
    try:
        yield True
    finally:
        del layer.forward
