"""MiniLM quantized to int8 (OpenVINO + NNCF post-training quantization) against float32 MiniLM.

The issue's option "OpenVINO int8 with calibrated thresholds", measured, not assumed:

* **quantization**: the OpenVINO MiniLM of :mod:`agentgym_credit.embedding.openvino`, weights and
  activations quantized to int8 by ``nncf.quantize`` (``ModelType.TRANSFORMER``), calibrated on the
  clean pages of the calibration rollouts;
* **speed**: 1,000 new noisy pages (``benchmarks/matching_backends.py``'s speed batch), fresh matcher with
  the model loaded, float32 against int8;
* **agreement**: the int8 threshold is calibrated to the float32 ``embedding:0.95`` partition (best mean
  ARI over a grid) on the calibration pages (Sokoban and ALFWorld, reset seed ``--seed``), then the
  ARI and the estimators' step correlation are reported on held-out pages (reset seed
  ``--holdout-seed``: other rooms and games) at that threshold.

Usage: ``python benchmarks/matching_int8.py [--groups 16] [--seed 0] [--holdout-seed 1000]``. Needs
``nncf`` (``pip install -e .[int8]``). Writes ``benchmarks/results/matching/matching_int8.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentgym_credit.credit.matching.embedding import EmbeddingMatcher  # noqa: E402
from agentgym_credit.embedding import (  # noqa: E402
    DEFAULT_MODEL,
    EmbeddingCache,
    load_sentence_transformer,
    resolve_model_path,
)
from benchmarks.matching import collect_states, speed_batch, speed_pools  # noqa: E402
from benchmarks.matching_backends import ENVS, REFERENCE, agreement_settings  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "matching"
INT8_GRID = (0.9, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98)


def quantized_encoder(calibration_texts: list[str]) -> object:
    """A fresh OpenVINO MiniLM encoder whose model NNCF quantized to int8 on ``calibration_texts``."""
    import nncf

    from agentgym_credit.embedding.openvino import OpenVINOSentenceEncoder

    st_model = load_sentence_transformer(resolve_model_path(DEFAULT_MODEL), "cpu")
    encoder = OpenVINOSentenceEncoder(st_model)

    def features(text: str) -> dict:
        f = st_model.preprocess([text])
        return {k: f[k].numpy() for k in encoder.input_names}

    encoder.ov_model = nncf.quantize(encoder.ov_model, nncf.Dataset(calibration_texts, features),
                                     model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calibration_texts))
    encoder._queues.clear()  # compiled again from the quantized model on the next encode
    return encoder


def fp32_encoder() -> object:
    from agentgym_credit.embedding import load_sentence_model

    return load_sentence_model(device="cpu", backend="openvino")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--groups", type=int, default=16, help="Sokoban task groups (ALFWorld: 4 × 4 members)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holdout-seed", type=int, default=1000)
    ap.add_argument("--envs", nargs="+", default=sorted(ENVS), choices=sorted(ENVS))
    args = ap.parse_args(argv)
    envs = {env: ENVS[env] for env in args.envs}
    pages = {}
    for split, seed in (("calibration", args.seed), ("held-out", args.holdout_seed)):
        for env, (_, env_id, group_size, kwargs) in envs.items():
            groups = args.groups if env == "sokoban" else 4
            pages[split, env] = collect_states(env_id, groups, group_size, seed, **kwargs)
    calibration_texts = sorted({t for env in envs for t in pages["calibration", env].state})[:300]
    t0 = time.perf_counter()
    int8_model = quantized_encoder(calibration_texts)
    quantize_s = time.perf_counter() - t0
    fp32_model = fp32_encoder()

    # speed: 1,000 new noisy pages, model loaded
    source = collect_states("Sokoban-Group-v0", 96, 8, args.seed + 7, max_steps=50)
    boards = sorted(set(source.state) | set(source.next_state))
    batch = speed_batch(speed_pools(boards, 1000, args.seed)["noisy pages"], 16, 8, 50, args.seed)
    speed = []
    for name, model in (("float32", fp32_model), ("int8", int8_model)):
        model.encode(["warm up the compiled model"])
        start = time.perf_counter()
        EmbeddingMatcher(0.95, model=model, backend="openvino").match(batch)
        speed.append({"model": name, "new_s": time.perf_counter() - start, "load_avg": os.getloadavg()[0]})

    reference = EmbeddingCache(fp32_model, backend="openvino")
    int8 = EmbeddingCache(int8_model, backend="openvino")
    results = {}
    for split, seed in tqdm((("calibration", args.seed), ("held-out", args.holdout_seed)), desc="agreement"):
        for env in envs:
            results[split, env] = agreement_settings(pages[split, env], env, reference, int8, INT8_GRID, seed, "int8")
    calib = [s for env in envs for s in results["calibration", env]]
    theta = max(INT8_GRID, key=lambda t: np.mean([s["int8"][t]["ari_vs_minilm"] for s in calib]))
    command = shlex.join(["python", "benchmarks/matching_int8.py", *(argv if argv is not None else sys.argv[1:])])
    text = report(speed, results, theta, quantize_s, len(calibration_texts), args, command)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "matching_int8.md").write_text(text)
    out = {"speed": speed, "threshold": theta, "quantize_s": quantize_s,
           "agreement": {f"{split}/{env}": v for (split, env), v in results.items()}}
    (RESULTS / "matching_int8.json").write_text(json.dumps(out, indent=2, default=str))
    return out


def report(speed: list[dict], results: dict, theta: float, quantize_s: float, n_calib: int,
           args: argparse.Namespace, command: str) -> str:
    lines = [
        "# MiniLM int8 (OpenVINO + NNCF) against float32 MiniLM",
        "",
        f"Command: `{command}` (2 CPU cores shared with other jobs; the load average is printed per row).",
        "",
        f"Quantization: `nncf.quantize` (weights and activations int8, `ModelType.TRANSFORMER`) calibrated on "
        f"{n_calib} clean pages of the calibration rollouts, {quantize_s:.0f} s.",
        "",
        "## Speed (1,000 new noisy pages, ~88 tokens; fresh matcher, model loaded)",
        "",
        "| model | load avg | new s |",
        "|---|---:|---:|",
    ]
    lines += [f"| {r['model']} | {r['load_avg']:.1f} | {r['new_s']:.2f} |" for r in speed]
    lines += [
        "",
        "## Agreement with float32 MiniLM `" + REFERENCE + "`",
        "",
        f"θ = {theta:g}: the int8 threshold (grid {', '.join(f'{t:g}' for t in INT8_GRID)}) with the best mean ARI "
        f"against the float32 partition on the calibration pages (reset seed {args.seed}, "
        f"{' and '.join(ENVS[e][0] for e in args.envs)}); "
        f"held-out pages: reset seed {args.holdout_seed} (other rooms and games). Step corr: Pearson correlation "
        "of the step part of the advantages (advantage − GRPO) under int8 and float32 matching.",
        "",
        "| pages | env | noise | θ | ARI vs float32 | step corr GiGPO | step corr GraphGPO | ARI vs clean int8 / float32 |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for (split, env), settings in results.items():
        for s in settings:
            for t in sorted({theta, 0.95}):
                e = s["int8"][t]
                lines.append(f"| {split} | {ENVS[env][0]} | {s['noise']} | {t:g}{' (calibrated)' if t == theta else ''} "
                             f"| {e['ari_vs_minilm']:.3f} | {e['step_corr_gigpo']:.3f} | {e['step_corr_graphgpo']:.3f} | "
                             f"{e['ari_vs_clean']:.3f} / {s['minilm_ari_vs_clean']:.3f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
