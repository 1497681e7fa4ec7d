"""Speed of ``agc train``: the time of each phase of an iteration and the trainer's generation overhead.

For one configuration (default: Sokoban, 4 groups × 4 members, the tiny model) it runs ``--iters``
training iterations and reports, per iteration, the seconds spent in each phase (generate, env, credit,
reference log-probs, update) and the generation tokens/s. It then replays the same prompts — the
rollout's prompts, batched as the rollout batched them (one batch per vector step) — through a bare
batched ``model.generate`` of the same model (sampling, same temperature and token budget, eos as the
only stop) and prints the two tokens/s side by side: their ratio is the trainer's generation overhead
(1.0 = none; above 1 the trainer's loop is faster, e.g. because finished rows leave the batch).

Timings are wall-clock and CPU seconds (the process's, per phase as well as per iteration); the machine's load
average is recorded with them, since a shared machine makes wall-clock numbers vary and CPU seconds less so.

    python benchmarks/trainer_speed.py                      # tiny model
    python benchmarks/trainer_speed.py --model smollm2 --lora 8
    python benchmarks/trainer_speed.py --model smollm2 --lora 8 --precision bfloat16   # autocast (AMX / bf16 GPUs)

The bare ``generate`` runs in the same precision as the trainer (under the policy's autocast).
``--prefix`` picks how prompts share their common tokens (the A/B switch of that optimization, see
:func:`agentgym_credit.baselines.policy.shared_prefix_inputs`): ``clusters`` (the trainer's behaviour: each set
of prompts sharing a long prefix, e.g. a task group's, runs it once), ``batch`` (only the prefix every prompt of
a forward shares) or ``none`` (every row's whole prompt; ``--no-shared-prefix`` is the same).
``--kv-cache`` is the A/B switch of the sampler's cache: ``reserved`` (the trainer's: keys and values appended
in place, :mod:`agentgym_credit.baselines.kv_cache`) or ``concatenating`` (Hugging Face's ``DynamicCache``,
which copies every layer's cache at every token).
Three A/B switches take ``both``: two trainers with the same seed in one process, their iterations interleaved
(the order alternating), so that both variants see the same load; the table gives each one's phases side by side
and whether they sampled the same tokens. ``--linear``: the linear layers' float32 CPU products on ``onednn`` (the
trainer's, :func:`agentgym_credit.baselines.runtime.use_onednn_linears`) or ``mkl`` (torch's own ``nn.Linear``).
``--decode-step``: the sampler's decoding step ``lean`` (the trainer's: stacked q/k/v and gate/up products,
:mod:`agentgym_credit.baselines.decode_step`, the same logits) or ``model`` (the model's forward).
``--last-layer``: the last decoder layer at the ``response`` positions only where logits are read (the trainer's,
:mod:`agentgym_credit.baselines.last_layer`) or ``whole``.

    python benchmarks/trainer_speed.py --model tiny --iters 3 --linear both --name trainer_speed_tiny_onednn
    python benchmarks/trainer_speed.py --model tiny --iters 4 --decode-step both --name trainer_speed_tiny_lean_decode

    python benchmarks/trainer_speed.py --env SearchQA-Group-v0 --model smollm2 --lora 8 --precision auto \
        --groups 2 --group-size 4 --max-steps 1 --max-new-tokens 64 --env-kwarg topk=1 --prefix batch
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from agentgym_credit.baselines import generation as generation_module
from agentgym_credit.baselines import kv_cache as kv_cache_module
from agentgym_credit.baselines import policy as policy_module
from agentgym_credit.baselines.config import TrainConfig
from agentgym_credit.baselines.policy import PRECISIONS, left_pad
from agentgym_credit.baselines.trainer import Trainer
from agentgym_credit.cli_args import key_value
from agentgym_credit.machine import accelerator, cpu_model

RESULTS = Path(__file__).resolve().parent / "results" / "trainer_speed"
PHASES = ("generate_s", "env_s", "credit_s", "logprob_s", "update_s", "iteration_s")
CPU_PHASES = ("generate_cpu_s", "env_cpu_s", "credit_cpu_s", "logprob_cpu_s", "update_cpu_s", "iteration_cpu_s")


@torch.no_grad()
def bare_generate_tokens_per_s(trainer: Trainer, prompt_batches: list[list[list[int]]]) -> tuple[float, int, float]:
    """Tokens/s of plain ``model.generate`` on the given tokenized prompt batches (left-padded)."""
    policy, cfg = trainer.policy, trainer.config
    model = policy.model
    model.eval()
    tokens, start = 0, time.perf_counter()
    for ids in prompt_batches:
        with policy.autocast():
            input_ids, attn = left_pad(ids, policy.pad_id)
            width = input_ids.shape[1]
            sample = cfg.temperature > 0
            out = model.generate(input_ids=input_ids.to(trainer.device), attention_mask=attn.to(trainer.device),
                                 max_new_tokens=cfg.max_new_tokens, do_sample=sample, pad_token_id=policy.pad_id,
                                 eos_token_id=policy.eos_id, temperature=cfg.temperature if sample else None,
                                 top_k=0 if sample else None, top_p=1.0 if sample else None)
            new = out[:, width:]
            for row in new.tolist():  # tokens up to and including eos
                n = len(row)
                if policy.eos_id is not None and policy.eos_id in row:
                    n = row.index(policy.eos_id) + 1
                tokens += n
    elapsed = time.perf_counter() - start
    return tokens / elapsed, tokens, elapsed


LEAN_DECODING = generation_module.supports_lean_decoding
RESPONSE_POSITIONS = policy_module.response_positions_only
VARIANTS = {"linear": ("onednn", "mkl"), "decode_step": ("lean", "model"), "last_layer": ("response", "whole")}
"""Each A/B switch's values: the trainer's first, the baseline second."""
NAMES = {"linear": ("oneDNN", "torch's `nn.Linear` (MKL)"), "decode_step": ("the lean decoding step", "the model's forward"),
         "last_layer": ("the last layer at the response positions", "the whole last layer")}


@contextlib.contextmanager
def _whole_layer(model, keep):
    yield False


def use_settings(decode_step: str, last_layer: str) -> None:
    """Switch the sampler's decoding step and the last layer's positions (read when the trainer calls them)."""
    generation_module.supports_lean_decoding = LEAN_DECODING if decode_step == "lean" else (lambda model: False)
    restrict = RESPONSE_POSITIONS if last_layer == "response" else _whole_layer
    policy_module.response_positions_only = generation_module.response_positions_only = restrict


def build_trainer(config: TrainConfig, linear: str) -> Trainer:
    """A trainer whose policy runs its linear layers on oneDNN (the default) or on torch's own ``nn.Linear``."""
    if linear == "onednn":
        return Trainer(config)
    swap = policy_module.use_onednn_linears
    policy_module.use_onednn_linears = lambda model: 0
    try:
        return Trainer(config)
    finally:
        policy_module.use_onednn_linears = swap


def timed_iteration(trainer: Trainer, it: int) -> dict:
    """``trainer.iterate(it)``'s metrics with the process's CPU seconds of the iteration and of each phase."""
    cpu: dict[str, float] = {}

    def counted(name: str, fn):
        def call(*args, **kwargs):
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu[name] = cpu.get(name, 0.0) + time.process_time() - start
        return call

    originals = {name: getattr(trainer, name) for name in ("rollout", "assign_credit", "reference_logprobs", "update")}
    generate = trainer.generator.generate
    for name, fn in originals.items():
        setattr(trainer, name, counted(name, fn))
    trainer.generator.generate = counted("generate", generate)
    start = time.process_time()
    try:
        metrics = trainer.iterate(it)
    finally:
        for name in originals:
            delattr(trainer, name)
        del trainer.generator.generate
    metrics["iteration_cpu_s"] = time.process_time() - start
    metrics["generate_cpu_s"] = cpu.get("generate", 0.0)
    metrics["env_cpu_s"] = cpu.get("rollout", 0.0) - metrics["generate_cpu_s"]
    metrics["credit_cpu_s"] = cpu.get("assign_credit", 0.0)
    metrics["logprob_cpu_s"] = cpu.get("reference_logprobs", 0.0)
    metrics["update_cpu_s"] = cpu.get("update", 0.0) - metrics["logprob_cpu_s"]
    metrics["steps"] = len(trainer.last_batch)
    ids = trainer.last_rollout.response_ids  # a fingerprint of the sampled tokens, to compare variants by
    metrics["tokens_sha1"] = hashlib.sha1(json.dumps(ids).encode()).hexdigest()
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--env", default="Sokoban-Group-v0")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--lora", type=int, default=0)
    parser.add_argument("--precision", choices=PRECISIONS, default="float32")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--iters", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--estimator", default="gigpo")
    parser.add_argument("--max-steps", type=int, default=0, help="environment max_steps (0 = its default)")
    parser.add_argument("--num-threads", type=int, default=0)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--name", default=None, help="result file stem (default trainer_speed_<model>)")
    parser.add_argument("--env-kwarg", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                        help="an environment argument (e.g. topk=1), as agc train --env-kwarg")
    parser.add_argument("--prefix", choices=("clusters", "batch", "none"), default="clusters",
                        help="prompt tokens shared per cluster of prompts (the trainer), per forward, or not at all")
    parser.add_argument("--no-shared-prefix", action="store_true", help="the same as --prefix none")
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf",
                        help="the trainer's sampler (vllm: in an environment with vLLM, e.g. .venv-vllm on a CPU)")
    parser.add_argument("--kv-cache", choices=("reserved", "concatenating"), default="reserved",
                        help="the sampler's KV cache: appended in place (the trainer) or Hugging Face's DynamicCache")
    parser.add_argument("--decode-step", choices=("lean", "model", "both"), default="lean",
                        help="the sampler's decoding step: stacked products (the trainer, where it applies), the "
                             "model's own forward, or both (two trainers, iterations interleaved)")
    parser.add_argument("--last-layer", choices=("response", "whole", "both"), default="response",
                        help="the last decoder layer at the positions whose logits are read (the trainer) or at every "
                             "position, or both (two trainers, iterations interleaved)")
    parser.add_argument("--linear", choices=("onednn", "mkl", "both"), default="onednn",
                        help="the linear layers' float32 CPU products: oneDNN (the trainer), torch's nn.Linear, or both "
                             "(two trainers, iterations interleaved)")
    args = parser.parse_args(argv)
    if args.no_shared_prefix:
        args.prefix = "none"
    if args.prefix == "none":
        policy_module.MIN_SHARED_PREFIX = sys.maxsize
    elif args.prefix == "batch":  # every forward's rows form one cluster: only their common prefix is shared
        policy_module.prefix_clusters = lambda rows, limits: ([0] * len(rows), [0])
    compared = [key for key in VARIANTS if getattr(args, key) == "both"]
    if len(compared) > 1:
        parser.error("only one of --linear, --decode-step and --last-layer can be 'both'")
    if args.kv_cache == "concatenating":
        from transformers import DynamicCache

        kv_cache_module.reserved_cache = lambda config, reserve: DynamicCache(config=config)

    import tempfile

    load_before = os.getloadavg()
    config = TrainConfig(env_id=args.env, model=args.model, lora=args.lora, precision=args.precision, backend=args.backend,
                         groups=args.groups,
                         group_size=args.group_size, iters=args.iters, max_new_tokens=args.max_new_tokens,
                         estimator=args.estimator, num_threads=args.num_threads, cache_dir=args.cache_dir,
                         out_dir=tempfile.mkdtemp(prefix="trainer-speed-"), progress_bar=True,
                         env_kwargs={**({"max_steps": args.max_steps} if args.max_steps else {}), **dict(args.env_kwarg)})
    switch = compared[0] if compared else None
    variants = list(VARIANTS[switch]) if switch else [args.linear]
    fixed = {key: getattr(args, key) for key in VARIANTS}

    def settings(variant: str) -> dict[str, str]:
        return {**fixed, **({switch: variant} if switch else {})}

    trainers = {variant: build_trainer(config, settings(variant)["linear"]) for variant in variants}
    trainer = trainers[variants[0]]
    runs: dict[str, list[dict]] = {variant: [] for variant in variants}
    prompt_batches: list[list[list[int]]] = []
    for it in range(args.iters):
        for variant in (variants if it % 2 == 0 else variants[::-1]):  # interleaved, the order alternating
            chosen = settings(variant)
            use_settings(chosen["decode_step"], chosen["last_layer"])
            metrics = timed_iteration(trainers[variant], it)
            runs[variant].append(metrics)
            print(f"iter {it} ({variant}): " + ", ".join(f"{k} {metrics[k]:.1f}" for k in PHASES)
                  + f", generate {metrics['generate_tokens_per_s']:.0f} tok/s, cpu {metrics['iteration_cpu_s']:.1f} s "
                  + "(" + ", ".join(f"{k[:-6]} {metrics[k]:.1f}" for k in CPU_PHASES[:-1]) + ")", flush=True)
    use_settings(**{k: v for k, v in settings(variants[0]).items() if k != "linear"})
    if len(variants) == 2:  # the same seeds: the same sampled tokens where the variants differ in rounding only
        same = all(a["tokens_sha1"] == b["tokens_sha1"] for a, b in zip(*runs.values(), strict=True))
        print(f"both variants sampled the same tokens every iteration: {same}")
    rows = runs[variants[0]]
    batch = trainer.last_batch
    # the last rollout's prompts, batched by vector step (the members active at step k have t == k)
    rollout_prompts = trainer.last_rollout.prompt_ids
    for k in np.unique(batch.t):
        prompt_batches.append([rollout_prompts[i] for i in np.flatnonzero(batch.t == k)])
    bare_tps, bare_tokens, bare_s = bare_generate_tokens_per_s(trainer, prompt_batches)
    ours_tps = rows[-1]["generate_tokens_per_s"]
    load_after = os.getloadavg()
    keys = (*PHASES, *CPU_PHASES, "generate_tokens_per_s", "response_tokens", "steps", "distinct_rows", "mean_steps",
            "success_rate", "valid_rate", "tokens_sha1", "prefill_s", "decode_steps")
    summary = {
        "env": args.env, "model": args.model, "lora": args.lora, "precision": trainer.policy.precision,
        "groups": args.groups,
        "group_size": args.group_size, "max_new_tokens": args.max_new_tokens, "estimator": args.estimator,
        "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "cpu": cpu_model(), "gpu": accelerator(),
        "device": str(trainer.device), "shared_prefix": args.prefix != "none", "prefix": args.prefix,
        "kv_cache": args.kv_cache, "decode_step": args.decode_step, "last_layer": args.last_layer,
        "compared": switch, "backend": args.backend, "linear": args.linear, "variants": variants,
        "env_kwargs": config.env_kwargs,
        "load_average_before": load_before, "load_average_after": load_after,
        "iterations": [{k: r.get(k) for k in keys} for r in rows],  # vLLM reports no prefill / decoding steps
        "runs": {variant: [{k: r.get(k) for k in keys} for r in runs[variant]] for variant in variants},
        "mean_iteration_s": float(np.mean([r["iteration_s"] for r in rows])),
        "mean_iteration_cpu_s": {variant: float(np.mean([r["iteration_cpu_s"] for r in runs[variant]]))
                                 for variant in variants},
        "trainer_generate_tokens_per_s": ours_tps,
        "bare_generate_tokens_per_s": bare_tps, "bare_generate_tokens": bare_tokens, "bare_generate_s": bare_s,
        "ratio_trainer_over_bare": ours_tps / bare_tps if bare_tps else float("nan"),
    }
    stem = args.name or f"trainer_speed_{Path(args.model).name}" + (f"_lora{args.lora}" if args.lora else "")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"# Trainer speed: {args.env}, {args.groups} groups x {args.group_size}, model {args.model}"
        + (f" + LoRA {args.lora}" if args.lora else "") + f", {trainer.policy.precision}"
        + {"clusters": "", "batch": ", prefix shared per forward only", "none": ", no shared-prefix forward"}[args.prefix]
        + (", concatenating KV cache" if args.kv_cache == "concatenating" else "")
        + (", the model's own decoding step" if args.decode_step == "model" else "")
        + (", the whole last layer" if args.last_layer == "whole" else "")
        + (", vLLM sampler" if args.backend == "vllm" else ""),
        "",
        f"`python benchmarks/trainer_speed.py {' '.join(sys.argv[1:] if argv is None else argv)}`; {summary['threads']} torch thread(s) on {summary['cpu_count']} cores of {summary['cpu']}"
        + (f", on one {summary['gpu']}" if summary["gpu"] else "") + "; load "
        f"average {load_before[0]:.1f} before, {load_after[0]:.1f} after (a shared machine: wall-clock times "
        "include waiting for the CPU; the process's CPU seconds are given in brackets).",
        "",
        f"| iter | {(switch or 'linear').replace('_', ' ')} | generate s | of it prefill s | decoding steps | env s "
        "| credit s | ref log-probs s | update s | iteration s | iteration CPU s | gen tok/s | response tokens "
        "| steps (distinct) | mean steps |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i in range(args.iters):
        for variant in variants:
            r = runs[variant][i]
            lines.append(
                f"| {i} | {variant} | {r['generate_s']:.1f} ({r['generate_cpu_s']:.1f}) | "
                + (f"{r['prefill_s']:.1f} | {r['decode_steps']:.0f}" if "prefill_s" in r else "– | –")
                + f" | {r['env_s']:.1f} "
                f"({r['env_cpu_s']:.1f}) | {r['credit_s']:.2f} | {r['logprob_s']:.1f} ({r['logprob_cpu_s']:.1f}) | "
                f"{r['update_s']:.1f} ({r['update_cpu_s']:.1f}) | {r['iteration_s']:.1f} | {r['iteration_cpu_s']:.1f} | "
                f"{r['generate_tokens_per_s']:.0f} | {r['response_tokens']:.0f} | {r['steps']} ({r['distinct_rows']:.0f}) "
                f"| {r['mean_steps']:.1f} |")
    if len(variants) == 2:
        ours, base = runs[variants[0]], runs[variants[1]]
        # the process warms up (oneDNN's kernels, the reference copy) in the first trainer's first iteration
        skip = 1 if args.iters > 1 else 0
        ratio = {k: sum(r[k] for r in base[skip:]) / max(sum(r[k] for r in ours[skip:]), 1e-9)
                 for k in ("generate_cpu_s", "logprob_cpu_s", "update_cpu_s", "iteration_cpu_s", "iteration_s")}
        mine, theirs = NAMES[switch]
        over = "iterations 1 on (the first one warms the process up)" if skip else "all iterations"
        lines += ["", f"CPU seconds over {over}, {theirs} over {mine}: generate "
                  f"**{ratio['generate_cpu_s']:.2f}×**, reference log-probs **{ratio['logprob_cpu_s']:.2f}×**, update "
                  f"**{ratio['update_cpu_s']:.2f}×**, iteration **{ratio['iteration_cpu_s']:.2f}×** (wall-clock "
                  f"{ratio['iteration_s']:.2f}×); the same sampled token ids every iteration: "
                  f"{all(a['tokens_sha1'] == b['tokens_sha1'] for a, b in zip(base, ours, strict=True))}."]
    lines += ["", f"Generation on the last rollout's prompts ({variants[0]}): trainer {ours_tps:.0f} tokens/s, bare batched "
              f"`model.generate` {bare_tps:.0f} tokens/s ({bare_tokens} tokens in {bare_s:.1f} s): ratio "
              f"**{summary['ratio_trainer_over_bare']:.2f}**.", ""]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))
    for each in trainers.values():
        each.env.close()
    use_settings("lean", "response")  # the trainer's own again
    return 0


if __name__ == "__main__":
    sys.exit(main())
