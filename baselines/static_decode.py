"""Token-by-token sampling on a static KV cache, the decode step captured once as a CUDA graph.

Hugging Face's decode loop launches every kernel of every layer from Python at every token. On a GPU that launch
work, not the arithmetic, sets the pace: SmolLM2-135M (30 layers) with a LoRA adapter decoded about 20 steps per
second for a batch of 16 on an H200, the GPU idle most of the time. :class:`StaticDecoder` removes it:

1. the prompts are prefilled as :class:`~agentgym_credit.baselines.generation.HFGenerator` prefills them (each
   distinct prompt once, shared prefixes once), and the first token is sampled from the prefill's logits;
2. each layer's keys and values are copied into a buffer with room for the whole response,
   ``[B, heads, L, head_dim]`` with ``L ≥ prompt width + max_new_tokens`` (a *static* cache);
3. one decode step writes the new token's keys and values at column ``write_at``, attends over the whole buffer
   through a mask of the filled, non-padding columns, samples the next token, records it (and its log-probability)
   in a device buffer and advances ``write_at``, the rows' positions and the mask — every tensor it touches has a
   fixed shape and address. On CUDA the step is captured
   once per shape as a ``torch.cuda.CUDAGraph`` and replayed for every token: one launch per token instead of
   several hundred. On the CPU the same step runs eagerly.

Rows that finished keep computing (the shapes are static) and their tokens are dropped. The host reads the sampled
tokens once every ``check_every`` steps (one transfer, no wait per token), cuts each row at its first eos or stop
string and ends the loop when every row has stopped. Batch sizes are rounded up to a power of two and cache lengths to a multiple of
:data:`LENGTH_BUCKET`, so a rollout whose prompts grow step by step reuses a few captured graphs.

Sampling is the exponential-race form of drawing one token from ``softmax(z / T)`` — the token maximising
:math:`p_i / q_i` with :math:`q_i \\sim \\operatorname{Exp}(1)` — which is how ``torch.multinomial`` draws one
sample and which a CUDA graph can replay (the generator's offset advances at each replay). With ``T = 0`` the
step takes the argmax. The kept log-probability is :math:`\\log\\operatorname{softmax}(z / T)[a]` as in the
dynamic sampler, and with it the entropy of that distribution (EMPG's step entropy), so greedy tokens,
log-probabilities and entropies agree with it to float32 rounding (tested on the CPU).

Contents: :class:`StaticDecoder`, :class:`StaticLayer`, :func:`supports_static_decoding`, :data:`LENGTH_BUCKET`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from .entropy import token_entropy

__all__ = ["LENGTH_BUCKET", "StaticDecoder", "StaticLayer", "supports_static_decoding"]

LENGTH_BUCKET = 128
"""Cache lengths are rounded up to a multiple of this many tokens (fewer distinct graphs to capture)."""

_MASK_KINDS = {"sdpa": "bool", "eager": "additive"}


def supports_static_decoding(model: Any) -> bool:
    """Whether ``model`` can decode on a static cache: every cache layer plain full attention, and an attention
    implementation that takes an explicit 4-D mask (``sdpa`` or ``eager``)."""
    config = getattr(model, "config", None)
    if config is None or _mask_kind(model) is None:
        return False
    try:
        cache = DynamicCache(config=config)
    except Exception:  # noqa: BLE001 - any model whose cache cannot be built this way is not supported
        return False
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def _mask_kind(model: Any) -> str | None:
    implementation = getattr(model.config, "_attn_implementation", None) or "eager"
    return _MASK_KINDS.get(str(implementation))


class StaticLayer(DynamicLayer):
    """One layer's keys and values in fixed buffers; ``update`` writes the new token at column ``write_at``.

    Args:
        keys: ``[B, heads, L, head_dim]`` buffer.
        values: ``[B, heads, L, head_dim]`` buffer.
        write_at: one-element long tensor, the column the next token's keys and values go to.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, write_at: torch.Tensor) -> None:
        super().__init__()
        self.keys, self.values, self.write_at = keys, values, write_at
        self.dtype, self.device = keys.dtype, keys.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the step's keys and values at ``write_at``; return the whole buffers (the mask hides the rest)."""
        self.keys.index_copy_(2, self.write_at, key_states.to(self.keys.dtype))
        self.values.index_copy_(2, self.write_at, value_states.to(self.values.dtype))
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return int(self.keys.shape[-2])


@dataclass
class _Buffers:
    """The fixed tensors of one (batch, length) shape and, on CUDA, the graph that replays a step on them."""

    batch: int
    length: int
    cache: DynamicCache
    layers: list[StaticLayer]
    tokens: torch.Tensor  # [B, 1] the token fed to the next step
    positions: torch.Tensor  # [B, 1] its position (rotary)
    write_at: torch.Tensor  # [1] its cache column
    valid: torch.Tensor  # [B, L] bool, the columns a row attends to
    emitted: torch.Tensor  # [B, R] the tokens the steps sampled, one column per step
    emitted_logps: torch.Tensor  # [B, R] their log-probabilities
    emitted_entropy: torch.Tensor  # [B, R] the entropy of the distribution each was drawn from
    emit_at: torch.Tensor  # [1] the column the next step's token goes to
    graph: Any = None
    steps: int = field(default=0)


class StaticDecoder:
    """Decode loop on a static KV cache; on CUDA each step is one CUDA-graph replay.

    Args:
        model: the causal LM (peft-wrapped or not) it decodes for; :meth:`decode` may be given another (a LoRA
            adapter attached later wraps the model). Parameters may change between calls: training updates them
            in place, which the captured graphs see.
        temperature: ``T``; ``0`` is greedy.
        autocast_dtype: the dtype of the policy's autocast (``torch.bfloat16``) or None.
        use_graphs: capture CUDA graphs (default: when the model is on CUDA).
        max_graphs: captured shapes kept (least recently used dropped first).
        check_every: decode steps run between two checks of the rows for eos and stop strings. The steps' tokens
            stay on the device until a check reads them, so the GPU is not held up by the host; a row's response
            is cut at its first stop whenever the check comes, so the result does not depend on this (at most
            ``check_every - 1`` steps are computed past the last row's end).
    """

    def __init__(self, model: Any, temperature: float, autocast_dtype: torch.dtype | None = None,
                 use_graphs: bool | None = None, max_graphs: int = 6, check_every: int = 8) -> None:
        if check_every < 1:
            raise ValueError(f"check_every must be >= 1, got {check_every}")
        kind = _mask_kind(model)
        if kind is None or not supports_static_decoding(model):
            raise ValueError(
                f"static decoding needs full-attention layers with sdpa or eager attention, not "
                f"{getattr(model.config, '_attn_implementation', None)!r}; use the dynamic sampler"
            )
        self.model = model
        self.temperature = float(temperature)
        self.autocast_dtype = autocast_dtype
        self.mask_kind = kind
        self.device = next(model.parameters()).device
        self.use_graphs = (self.device.type == "cuda") if use_graphs is None else bool(use_graphs)
        self.max_graphs = int(max_graphs)
        self.check_every = int(check_every)
        self._buffers: dict[tuple[int, int, int, int], _Buffers] = {}
        self._pool: Any = None
        self.stats = {"graphs_captured": 0, "graph_replays": 0, "eager_steps": 0}
        self.capture_error: str | None = None

    # ------------------------------------------------------------------------------------------- sampling
    def pick(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(next token [B, 1], its log-probability [B], the distribution's entropy [B])`` from logits ``[B, V]``
        (see the module docstring)."""
        sample = self.temperature > 0
        logp = torch.log_softmax(logits.float() / (self.temperature if sample else 1.0), dim=-1)
        if sample:
            race = torch.empty_like(logp).exponential_(1.0)
            nxt = (logp.exp() / race).argmax(-1, keepdim=True)
        else:
            nxt = logp.argmax(-1, keepdim=True)
        return nxt, logp.gather(-1, nxt).squeeze(-1), token_entropy(logp)

    # ---------------------------------------------------------------------------------------------- shapes
    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        # no weight-cast cache: a captured graph must not point at casts freed when the context exits
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype, cache_enabled=False)

    def _allocate(self, batch: int, length: int, responses: int, like: DynamicCache) -> _Buffers:
        device = self.device
        write_at = torch.zeros(1, dtype=torch.long, device=device)
        layers = []
        for layer in like.layers:
            shape = (batch, layer.keys.shape[1], length, layer.keys.shape[-1])
            vshape = (batch, layer.values.shape[1], length, layer.values.shape[-1])
            layers.append(StaticLayer(layer.keys.new_zeros(shape), layer.values.new_zeros(vshape), write_at))
        cache = DynamicCache(config=self.model.config)
        cache.layers = list(layers)
        return _Buffers(
            batch=batch, length=length, cache=cache, layers=layers,
            tokens=torch.zeros((batch, 1), dtype=torch.long, device=device),
            positions=torch.zeros((batch, 1), dtype=torch.long, device=device),
            write_at=write_at,
            valid=torch.zeros((batch, length), dtype=torch.bool, device=device),
            emitted=torch.zeros((batch, responses), dtype=torch.long, device=device),
            emitted_logps=torch.zeros((batch, responses), dtype=torch.float32, device=device),
            emitted_entropy=torch.zeros((batch, responses), dtype=torch.float32, device=device),
            emit_at=torch.zeros(1, dtype=torch.long, device=device),
        )

    def _buffers_for(self, batch: int, length: int, responses: int, like: DynamicCache) -> _Buffers:
        key = (id(self.model), 1 << max(0, math.ceil(math.log2(batch))),
               -(-length // LENGTH_BUCKET) * LENGTH_BUCKET, responses)
        found = self._buffers.pop(key, None)
        if found is None:
            if len(self._buffers) >= self.max_graphs:
                self._buffers.pop(next(iter(self._buffers)))
            found = self._allocate(key[1], key[2], key[3], like)
        self._buffers[key] = found  # most recently used last
        return found

    # ------------------------------------------------------------------------------------------------ step
    def _mask(self, buffers: _Buffers) -> torch.Tensor:
        allowed = buffers.valid[:, None, None, :]
        if self.mask_kind == "bool":
            return allowed
        zero = torch.zeros((), dtype=torch.float32, device=self.device)
        return torch.where(allowed, zero, torch.finfo(torch.float32).min)

    def _step(self, buffers: _Buffers) -> None:
        """One decode step on ``buffers`` (the body of the CUDA graph)."""
        buffers.valid.index_fill_(1, buffers.write_at, True)
        logits = self.model(input_ids=buffers.tokens, attention_mask=self._mask(buffers),
                            position_ids=buffers.positions, past_key_values=buffers.cache,
                            use_cache=True).logits[:, -1]
        nxt, logp, entropy = self.pick(logits)
        buffers.emitted.index_copy_(1, buffers.emit_at, nxt)
        buffers.emitted_logps.index_copy_(1, buffers.emit_at, logp.unsqueeze(1))
        buffers.emitted_entropy.index_copy_(1, buffers.emit_at, entropy.unsqueeze(1))
        buffers.emit_at.add_(1)
        buffers.tokens.copy_(nxt)
        buffers.positions.add_(1)
        buffers.write_at.add_(1)

    def _capture(self, buffers: _Buffers) -> None:
        """Warm up, then capture :meth:`_step` on ``buffers`` as a CUDA graph (state reloaded afterwards)."""
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), self._autocast():
            for _ in range(2):
                buffers.write_at.zero_()
                buffers.emit_at.zero_()
                self._step(buffers)
        torch.cuda.current_stream(self.device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        buffers.write_at.zero_()
        buffers.emit_at.zero_()
        with torch.cuda.graph(graph, pool=self._pool), self._autocast():
            self._step(buffers)
        buffers.graph = graph
        self.stats["graphs_captured"] += 1

    def _prepare(self, buffers: _Buffers) -> None:
        """Capture the step for ``buffers``' shape if not yet done (before the state is loaded: the warm-up
        writes into the buffers)."""
        if self.use_graphs and buffers.graph is None:
            try:
                self._capture(buffers)
            except RuntimeError as exc:  # a model the graph cannot capture: keep the static loop, eagerly
                self.use_graphs = False
                self.capture_error = f"{type(exc).__name__}: {exc}"
                torch.cuda.synchronize(self.device)

    @property
    def steps(self) -> int:
        """Decoding steps run so far, replayed from a graph or eager."""
        return self.stats["graph_replays"] + self.stats["eager_steps"]

    def _run_step(self, buffers: _Buffers) -> None:
        if self.use_graphs:
            if buffers.graph is not None:
                buffers.graph.replay()
                self.stats["graph_replays"] += 1
                return
        with self._autocast():
            self._step(buffers)
        self.stats["eager_steps"] += 1

    # ------------------------------------------------------------------------------------------------ loop
    def decode(self, logits: torch.Tensor, cache: DynamicCache, attention_mask: torch.Tensor,
               position: torch.Tensor, max_new_tokens: int, stopped: Callable[[list[int]], bool],
               model: Any = None) -> tuple[list[list[int]], list[list[float]], list[list[float]]]:
        """Sample up to ``max_new_tokens`` tokens per row after a prefill.

        Args:
            logits: ``[B, V]`` the prefill's logits at each row's last prompt token.
            cache: the prefill's cache (``[B, heads, L0, head_dim]`` keys and values per layer).
            attention_mask: ``[B, L0]`` which of those columns each row attends to.
            position: ``[B, 1]`` the position of each row's last prompt token.
            max_new_tokens: the response budget.
            stopped: whether a row's response so far is finished (eos or a stop string).
            model: the model that ran the prefill (default: the one given at construction).

        Returns:
            ``(tokens, logprobs, entropies)`` per row, one value per token.
        """
        if model is not None and model is not self.model:
            self.model = model
        rows = logits.shape[0]
        first, first_logp, first_entropy = self.pick(logits)
        tokens = [[t] for t in first.squeeze(-1).tolist()]
        logps = [[lp] for lp in first_logp.tolist()]
        entropy = [[h] for h in first_entropy.tolist()]
        active = [not stopped(row) for row in tokens]
        if max_new_tokens <= 1 or not any(active):
            return tokens, logps, entropy
        filled = attention_mask.shape[1]
        steps = max_new_tokens - 1
        buffers = self._buffers_for(rows, filled + max_new_tokens, steps, cache)
        self._prepare(buffers)
        index = torch.cat([torch.arange(rows, device=self.device),
                           torch.zeros(buffers.batch - rows, dtype=torch.long, device=self.device)])
        for static, layer in zip(buffers.layers, cache.layers, strict=True):
            static.keys[:, :, :filled].copy_(layer.keys[index])
            static.values[:, :, :filled].copy_(layer.values[index])
        buffers.valid.zero_()
        buffers.valid[:, :filled].copy_(attention_mask[index].bool())
        buffers.tokens.copy_(first[index])
        buffers.positions.copy_(position[index] + 1)
        buffers.write_at.fill_(filled)
        buffers.emit_at.zero_()
        taken = [1] * rows  # tokens kept per row (the first came from the prefill)
        done = 0
        while done < steps and any(active):
            chunk = min(self.check_every, steps - done)
            for _ in range(chunk):  # the GPU runs ahead; the rows are checked once per chunk
                self._run_step(buffers)
            emitted = buffers.emitted[:rows, done:done + chunk].tolist()
            for r in range(rows):
                for token in emitted[r] if active[r] else ():
                    tokens[r].append(token)
                    if stopped(tokens[r]):
                        active[r] = False
                        break
                taken[r] = len(tokens[r])
            done += chunk
        kept = buffers.emitted_logps[:rows, :max(taken) - 1].tolist()
        kept_entropy = buffers.emitted_entropy[:rows, :max(taken) - 1].tolist()
        for r in range(rows):
            logps[r].extend(kept[r][:taken[r] - 1])
            entropy[r].extend(kept_entropy[r][:taken[r] - 1])
        return tokens, logps, entropy
