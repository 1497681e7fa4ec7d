"""One decoding step of a Llama-architecture model with fewer, larger products than Hugging Face's forward.

In the sampler's loop every step feeds one token per row. Hugging Face's ``LlamaForCausalLM.forward`` then spends a
good part of the step outside the arithmetic: a module call per projection, the mask and cache bookkeeping, and
seven small products per layer, each paying oneDNN's fixed cost per call (for 16 rows of the tiny policy on the
2-core Zen 5 EPYC, two threads, packed weights: 17 µs for one 256 × 256 product, 27 µs for a 768 × 256 one).
:class:`LlamaDecodeStep` computes the same layer,

.. math::

    h \\leftarrow h + W_o\\,\\operatorname{attn}(\\operatorname{rope}(W_q x), \\operatorname{rope}(W_k x), W_v x),
    \\quad x = \\operatorname{rms}(h), \\qquad
    h \\leftarrow h + W_{down}\\,(\\operatorname{act}(W_{gate} x') \\odot W_{up} x'), \\quad x' = \\operatorname{rms}(h),

with the model's own modules for the norms, the rotary embedding and the activation, with two products per layer
fewer — :math:`[W_q; W_k; W_v]` and :math:`[W_{gate}; W_{up}]` are stacked and packed into oneDNN's layout once for
the weights they were built from — and with the queries' and keys' heads rotated in one pass. Each output element
is still the same dot product of a row and a weight row and the same rotary arithmetic, so the logits are those of
the model's forward bit for bit on the machines measured (``tests/baselines/test_decode_step.py`` compares them
step by step to float32 rounding; ``benchmarks/trainer_speed.py --decode-step both`` compares the sampled tokens).
The sampler falls back to the model's forward wherever the step does not apply (:func:`supports_lean_decoding`: a
LoRA adapter, bf16 autocast, biases, another attention implementation or architecture, a GPU, where the static
decoder runs).
"""

from __future__ import annotations

from typing import Any

import torch

from .runtime import OneDNNLinear, onednn_product, packed_copies, plain_forward

__all__ = ["LlamaDecodeStep", "lean_decode_step", "supports_lean_decoding"]


def _weights_key(model: Any) -> tuple[tuple[int, int], ...]:
    """The version and address of every stacked weight: a step built before any of them changed is stale."""
    return tuple((p.weight._version, p.weight.data_ptr())
                 for layer in model.model.layers for p in _projections(layer))


def _projections(layer: Any) -> list[Any]:
    attention, mlp = layer.self_attn, layer.mlp
    return [attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj, mlp.gate_proj, mlp.up_proj,
            mlp.down_proj]


def supports_lean_decoding(model: Any) -> bool:
    """Whether :class:`LlamaDecodeStep` computes ``model``'s decoding step: a ``LlamaForCausalLM`` on the CPU (no
    peft wrapper), float32 :class:`~agentgym_credit.baselines.runtime.OneDNNLinear` projections without biases,
    SDPA attention, no autocast, and the class's own forward without hooks (Accelerate's mixed precision wraps the
    forward in an autocast that a step computed beside it would miss)."""
    from transformers import LlamaForCausalLM

    if type(model) is not LlamaForCausalLM or torch.is_autocast_enabled("cpu"):
        return False
    if not plain_forward(model):
        return False  # a wrapped forward (Accelerate's mixed precision autocasts inside it) or hooks: not ours to skip
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    head = model.lm_head
    linears = [head, *(p for layer in model.model.layers for p in _projections(layer))]
    return all(type(p) is OneDNNLinear and p.bias is None and p.weight.dtype == torch.float32
               and p.weight.device.type == "cpu" for p in linears)


class LlamaDecodeStep:
    """The decoding step of a Llama model (module docstring), for the weights it was built with.

    The stacked weights are copies made at construction: :func:`lean_decode_step` builds a step, or reuses the one
    built for the same weights within the same :func:`~agentgym_credit.baselines.runtime.packed_linears` context.
    Call it inside that context, so that ``o_proj``, ``down_proj`` and the head use their packed weights too.

    Args:
        model: a model for which :func:`supports_lean_decoding` holds.
    """

    def __init__(self, model: Any) -> None:
        if not supports_lean_decoding(model):
            raise ValueError("LlamaDecodeStep needs a float32 LlamaForCausalLM on the CPU without adapters or biases "
                             "(see supports_lean_decoding)")
        self.model = model
        self.weights_key = _weights_key(model)
        config = model.config
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        pack = torch.ops.mkldnn._reorder_linear_weight
        with torch.no_grad():
            self.qkv = [pack(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]), None)
                        for a in (layer.self_attn for layer in model.model.layers)]
            self.gate_up = [pack(torch.cat([m.gate_proj.weight, m.up_proj.weight]), None)
                            for m in (layer.mlp for layer in model.model.layers)]
        self.q_width = self.heads * self.head_dim
        self.intermediate = config.intermediate_size

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, cache: Any, mask: torch.Tensor) -> torch.Tensor:
        """The next-token logits ``[B, vocab]`` of one decoding step.

        Args:
            tokens: ``[B, 1]`` the token fed to each row.
            positions: ``[B, 1]`` its position.
            cache: the KV cache (a ``DynamicCache`` whose layers' ``update`` appends and returns the keys and values).
            mask: ``[B, L]`` the columns each row attends to (the new token's included), ``L`` the cache's length
                after the step.
        """
        from transformers.models.llama.modeling_llama import rotate_half

        base = self.model.model
        rows = tokens.shape[0]
        hidden = base.embed_tokens(tokens)
        cos, sin = base.rotary_emb(hidden, positions)
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # [B, 1, 1, head_dim]: every head of the one position
        attend = mask.bool()[:, None, None, :]
        heads, rotated = self.heads, self.heads + self.kv_heads
        gqa = self.kv_heads != self.heads
        for i, layer in enumerate(base.layers):
            attention = layer.self_attn
            qkv = onednn_product(layer.input_layernorm(hidden), self.qkv[i], None)
            # the queries' and keys' heads rotated together: apply_rotary_pos_emb's arithmetic, element by element
            query_key = qkv[..., :rotated * self.head_dim].view(rows, 1, rotated, self.head_dim)
            query_key = (query_key * cos) + (rotate_half(query_key) * sin)
            query = query_key[:, :, :heads].transpose(1, 2)
            key = query_key[:, :, heads:].transpose(1, 2)
            value = qkv[..., rotated * self.head_dim:].view(rows, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            keys, values = cache.layers[i].update(key, value)
            out = torch.nn.functional.scaled_dot_product_attention(
                query, keys, values, attn_mask=attend, scale=attention.scaling, enable_gqa=gqa)
            hidden = hidden + attention.o_proj(out.transpose(1, 2).reshape(rows, 1, self.q_width))
            mlp = layer.mlp
            gate_up = onednn_product(layer.post_attention_layernorm(hidden), self.gate_up[i], None)
            gate, up = gate_up[..., :self.intermediate], gate_up[..., self.intermediate:]
            hidden = hidden + mlp.down_proj(mlp.act_fn(gate) * up)
        return self.model.lm_head(base.norm(hidden))[:, -1]


def lean_decode_step(model: Any) -> LlamaDecodeStep:
    """The :class:`LlamaDecodeStep` of ``model``'s current weights: inside
    :func:`~agentgym_credit.baselines.runtime.packed_linears` the one built earlier in the outermost context if no
    weight changed since (a rollout stacks the weights once for all its sampling calls), else a new one."""
    copies = packed_copies(model)
    step = None if copies is None else copies.get("lean_decode_step")
    if step is None or step.weights_key != _weights_key(model):
        step = LlamaDecodeStep(model)
        if copies is not None:
            copies["lean_decode_step"] = step
    return step
