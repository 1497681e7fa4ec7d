"""Credit estimators compared with a real LLM policy: SFT warm start, then ``agc train`` with each estimator.

For each environment the policy is first behaviour-cloned on oracle trajectories
(:mod:`agentgym_credit.baselines.sft`), deliberately under-trained: SFT runs epoch by epoch and stops as
soon as the success on held-out tasks reaches ``--sft-target`` (20 % by default; the start is reported
whatever it is). From that checkpoint every estimator (grpo, rloo, gigpo, salt, graphgpo, step_gae, spa; also,
with ``--estimators``, hgpo, EMPG over grpo and over gigpo as ``empg_grpo`` / ``empg_gigpo`` (:data:`VARIANTS`),
or any registered name) trains with the same settings and seeds, and the success on held-out tasks (seeds from 10⁹, never used in
training) is measured before training and every ``--eval-every`` iterations.

Evaluation follows verl-agent's validation (the code GiGPO and GraphGPO report from): sampled at
temperature 0.4 (``val_kwargs.do_sample=True, temperature=0.4``), here with fixed sampling seeds, so the
same policy always gets the same score; ``--eval-temperature 0`` evaluates the greedy policy instead.

Runs are independent (one per estimator and seed) and go to ``--jobs`` worker processes (default: one per
core, each with one torch thread), so the default comparison fits its budget on two cores. The outputs are
rewritten each time a run finishes (marked partial until the last one), so a comparison that is stopped keeps
the runs it finished. On a CUDA machine the warm start and every run use the GPU.

Outputs in ``benchmarks/results/llm_compare/``: ``<stem>_curves.csv`` (one row per environment, estimator, seed and
evaluation), ``<stem>_train.csv`` (the sampled training success of every iteration, and how many of its
groups were uniform: all won or all lost), ``<stem>.json``
(everything), ``<stem>.md`` (final held-out success mean ± std per estimator against the SFT start),
``<stem>.png`` (held-out and training success against iterations) and ``<stem>_transcripts.jsonl`` (what the
policy wrote on the first ``--transcripts`` held-out tasks of every evaluation, the SFT start's included: one
line per step with its observation, response, reward and the episode's success; the way to find out why a run
fell; ``--train-transcripts`` adds every training rollout's steps with the advantage each was trained with).

    python benchmarks/llm_compare.py --quick          # smoke test: 1 seed, 2 iterations, Sokoban
    python benchmarks/llm_compare.py                   # the default comparison: Sokoban, tiny model
    python benchmarks/llm_compare.py --envs SearchQA-Group-v0 --stem llm_compare_searchqa   # a text environment (SmolLM2)
    python benchmarks/llm_compare.py --estimators grpo gigpo gigpo@tree tree_grpo@tree:prefix=sum \\
        --train step_budget=24 --train expand_rounds=0 --stem llm_compare_sokoban_trees   # chains vs trees
    python benchmarks/llm_compare.py --merge results/llm_compare/a.json results/llm_compare/b.json --stem ab   # seeds run apart, one table

A run's label is ``ESTIMATOR[@ROLLOUT][:KEY=VALUE,...]``: ``gigpo@tree`` trains GiGPO on tree rollouts
(``agc train --rollout tree``; the tree settings, e.g. ``--train step_budget=24``, apply to those runs only) and
``tree_grpo@tree:prefix=sum`` gives that run its own estimator parameters. With tree runs the table adds the
agent steps each rollout played per iteration, the budget chains and trees are compared at.

Seeds (or estimators) can run apart — another machine, another day, ``--seed0 K --start FOLDER`` from the same
SFT start (``--save-start DIR`` keeps the one a comparison trains; otherwise it is removed at the end) — and
``--merge`` combines their JSON files into one report; it refuses files whose start or settings
differ and says whether a run present in two files reproduced the same held-out curve.

An environment's entry in :data:`ENV_SETTINGS` replaces the defaults of some flags, adds environment
arguments and (its ``"train"`` entry) other :class:`TrainConfig` fields; a flag given on the command line wins.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from agentgym_credit.baselines.config import SFTConfig, TrainConfig
from agentgym_credit.baselines.losses import AGGREGATIONS
from agentgym_credit.baselines.policy import PRECISIONS, load_policy, resolve_precision
from agentgym_credit.baselines.runtime import resolve_device
from agentgym_credit.baselines.sft import collect_oracle_data, sft
from agentgym_credit.baselines.trainer import Trainer
from agentgym_credit.cli_args import key_value
from agentgym_credit.evaluation import held_out as evaluate
from agentgym_credit.machine import accelerator, cpu_model

RESULTS = Path(__file__).resolve().parent / "results" / "llm_compare"
ESTIMATORS = ("grpo", "rloo", "gigpo", "salt", "graphgpo", "step_gae", "spa")
"""The default comparison."""
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    # EMPG (arXiv:2509.09265, the paper's k = k_f = 1, ζ = 0.1) over a base: the trainer records each step's mean
    # token entropy from its sampler
    "empg_grpo": ("empg", {"base": "grpo"}),
    "empg_gigpo": ("empg", {"base": "gigpo"}),
}
"""Runs named apart from their estimator: label → (registered estimator, its parameters; ``--param`` adds to them).
Any other label is a registered estimator with ``--param``'s parameters (``hgpo``: K = 2, the Sokoban prompt's
history length)."""
ORDER = (*ESTIMATORS, "hgpo", *VARIANTS)
"""The order of a merged report's rows."""
ENV_SETTINGS: dict[str, dict[str, Any]] = {
    # Rooms solvable in one or two moves, four steps to do it. The tiny model learns to read the board
    # from 400 ε-noisy solver episodes (held-out success 0.3 after one SFT epoch, 0.7 after five).
    # KL 0.01 to the start (verl-agent's kl_loss_coef): without it a lost episode's four steps outnumber a won
    # episode's one or two, the advantages of a group's rows sum below zero, and the tokens every response
    # shares (<think>, </think>, <action>) are pushed down until the format collapses (valid-format rate below
    # 0.1 in 16 of 21 runs at KL 0, 6 of them within two iterations: docs/training.md).
    "Sokoban-Group-v0": {"max_steps": 4, "max_solution_steps": 2, "sft_episodes": 400, "sft_epsilon": 0.2},
    # Single-hop questions (one search turn, then Search-R1's answer-only turn), the top passage only, the
    # held-out evaluation on the test split's questions; clean oracle data (a noisy search in the only
    # search turn leaves nothing to learn from). The tiny model cannot copy names from the prompt, so the
    # policy is SmolLM2-135M-Instruct (full SFT, then LoRA 8 in RL) under bf16 autocast. Every episode is two
    # steps (search, answer), so no length bias pushes the format down: no KL (and no reference forward).
    # SmolLM2 is a strong reader: 32 oracle episodes start it at 0.64 on the test questions, above the 20-50 %
    # an under-trained start should have (and most groups of four then win together: no signal). Eight
    # episodes start it at 0.000 after one epoch (valid format 0.27) and 0.391 after two (64 test questions).
    # 64 response tokens: at 32 a long <think> is cut before its <search> closes (invalid), while an immediate
    # <answer> is short and valid; in a seed whose groups never won, the group-normalised advantages then
    # carried only that difference and taught the policy to answer without searching (held-out 0.391 → 0.000
    # for grpo, rloo, gigpo, salt and graphgpo in seed 2: docs/training.md). At 64 that seed keeps
    # searching (0.375-0.484), but grpo and salt collapse the same way in seed 1: results/llm_compare/llm_compare_searchqa.md.
    # The common cause of those falls: sampled at the training temperature (T = 1) the start wins 0.09 of its
    # training episodes (0.39 at the held-out T = 0.4), so most groups of four lose together and carry no
    # outcome signal. DAPO's dynamic sampling (filter_groups) plays fresh questions until two groups with a
    # winner and a loser are kept: grpo's seed 2, 0.000 without it, ended at 0.797 (results/llm_compare/filter_groups_searchqa.md).
    "SearchQA-Group-v0": {"max_steps": 1, "max_new_tokens": 64, "sft_epsilon": 0.0, "model": "smollm2",
                          "kl_coef": 0.0,
                          "precision": "auto", "lora": 8, "lr": 5e-4, "sft_lr": 5e-5, "sft_episodes": 8,
                          "sft_batch_size": 8, "groups": 2, "group_size": 4, "micro_batch_size": 4, "iters": 10,
                          "eval_every": 5, "eval_episodes": 64, "env": {"topk": 1}, "eval_env": {"split": "test"},
                          "train": {"filter_groups": True}},
}
"""Settings of an environment that replace the command line's defaults (a flag given explicitly wins)."""
SMOOTH = 5
"""Iterations averaged in the training-success curve."""
DEFAULT_ENVS = ("Sokoban-Group-v0",)
"""What a run without ``--envs`` compares (the budget of the default run: an hour on two cores)."""


def setting(env_id: str, args: argparse.Namespace, name: str) -> Any:
    """A flag's value for ``env_id``: given explicitly, else :data:`ENV_SETTINGS`, else the default."""
    if name in args.explicit or name not in ENV_SETTINGS.get(env_id, {}):
        return getattr(args, name)
    return ENV_SETTINGS[env_id][name]


def env_kwargs(env_id: str, args: argparse.Namespace, evaluation: bool = False) -> dict[str, Any]:
    """Environment arguments of training (or of the held-out evaluation)."""
    preset = ENV_SETTINGS.get(env_id, {})
    steps = setting(env_id, args, "max_steps")
    kwargs: dict[str, Any] = {"max_steps": steps} if steps else {}
    easy = setting(env_id, args, "max_solution_steps") if env_id.startswith("Sokoban") else 0
    if easy:  # easy rooms: solvable in a few moves
        kwargs["max_solution_steps"] = easy
    return {**kwargs, **preset.get("env", {}), **(preset.get("eval_env", {}) if evaluation else {})}


def held_out(policy: Any, env_id: str, args: argparse.Namespace,
             transcripts: list[dict[str, Any]] | None = None) -> dict[str, float]:
    """Success and valid-format rate on the held-out tasks, sampled at ``--eval-temperature`` (fixed seeds).

    ``transcripts`` receives the steps of the first ``--transcripts`` tasks (see :func:`agentgym_credit.evaluation.held_out`).
    """
    keep = args.transcripts
    return evaluate(policy, env_id, setting(env_id, args, "eval_episodes"),
                    max_new_tokens=setting(env_id, args, "max_new_tokens"), temperature=args.eval_temperature,
                    batch=32, transcripts=transcripts if keep else None, transcript_episodes=keep,
                    **env_kwargs(env_id, args, evaluation=True))


def warm_start(env_id: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """SFT epoch by epoch until the held-out success reaches the target; returns its record."""
    torch.set_num_threads(args.num_threads or os.cpu_count() or 1)
    data, stats = collect_oracle_data(env_id, setting(env_id, args, "sft_episodes"),
                                      epsilon=setting(env_id, args, "sft_epsilon"), seed=args.sft_seed, progress=False,
                                      **env_kwargs(env_id, args))
    record: dict[str, Any] = {"env": env_id, "oracle": stats, "epochs": []}
    config = SFTConfig(env_id=env_id, model=setting(env_id, args, "model"), out_dir=str(folder), epochs=1,
                       lr=setting(env_id, args, "sft_lr"), batch_size=setting(env_id, args, "sft_batch_size"),
                       precision=setting(env_id, args, "precision"), seed=args.sft_seed, cache_dir=args.cache_dir,
                       num_threads=torch.get_num_threads(), progress_bar=False)
    policy = None
    for epoch in range(args.sft_max_epochs):
        began = time.perf_counter()
        policy, info = sft(config, data, policy=policy)
        record["transcripts"] = []  # the start's: the last epoch's
        score = held_out(policy, env_id, args, record["transcripts"])
        record["epochs"].append({"epoch": epoch + 1, "loss": info["final_loss"], **score,
                                 "seconds": time.perf_counter() - began})
        print(f"[sft {env_id}] epoch {epoch + 1}: loss {info['final_loss']:.3f}, held-out success "
              f"{score['success_rate']:.3f}, valid {score['valid_rate']:.2f}", flush=True)
        if score["success_rate"] >= args.sft_target:
            break
    record["start"] = record["epochs"][-1]
    return record


RECORDED_TRAIN_FIELDS = ("penalty_credit", "temperature", "filter_groups", "filter_max_rollouts", "tree_schedule",
                         "trees", "expand_nodes", "expand_rounds", "step_budget")
"""Trainer fields set through ``--train`` (or an environment's ``"train"`` settings) that each comparison records
per environment, so that comparisons with different values neither merge nor read alike."""


def train_overrides(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """The other :class:`TrainConfig` fields of ``env_id``'s runs: its :data:`ENV_SETTINGS` ``"train"`` entry,
    then ``--train KEY=VALUE`` (which wins)."""
    return {**ENV_SETTINGS.get(env_id, {}).get("train", {}), **dict(args.train)}


def parse_label(label: str) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """A run's label, ``ESTIMATOR[@ROLLOUT][:KEY=VALUE,...]`` (e.g. ``tree_grpo@tree:prefix=sum``), as the
    estimator, the rollout (``chain`` unless ``@tree``), the parameters of the variant (``ESTIMATOR`` is a
    registered name or one of :data:`VARIANTS`: ``empg_grpo`` is EMPG over grpo) and the label's own."""
    head, _, own = label.partition(":")
    estimator, _, rollout = head.partition("@")
    estimator, variant = VARIANTS.get(estimator, (estimator, {}))
    return estimator, rollout or "chain", dict(variant), dict(key_value(pair) for pair in own.split(",") if pair)


def run_settings(env_id: str, label: str, seed: int, start: str, args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`TrainConfig` fields a run takes from this script's flags and its label (:func:`parse_label`;
    ``--train`` may set the others)."""
    estimator, rollout, variant, own = parse_label(label)
    return dict(env_id=env_id, estimator=estimator, rollout=rollout, model=start, groups=setting(env_id, args, "groups"),
                group_size=setting(env_id, args, "group_size"), iters=setting(env_id, args, "iters"),
                lr=setting(env_id, args, "lr"), max_new_tokens=setting(env_id, args, "max_new_tokens"),
                lora=setting(env_id, args, "lora"), precision=setting(env_id, args, "precision"), seed=seed,
                cache_dir=args.cache_dir, env_kwargs=env_kwargs(env_id, args), progress_bar=False,
                kl_coef=setting(env_id, args, "kl_coef"), loss_agg=setting(env_id, args, "loss_agg"),
                num_threads=1 if args.jobs > 1 else args.num_threads,
                micro_batch_size=setting(env_id, args, "micro_batch_size"), grad_accum=args.grad_accum,
                save_state=False, estimator_params={**variant, **dict(args.param), **own})


def run_one(env_id: str, estimator: str, seed: int, start: str, args: argparse.Namespace,
            start_score: dict[str, float]) -> dict[str, list[dict[str, Any]]]:
    """Train one estimator from the SFT start (one torch thread); returns its evaluation and training rows and
    the transcripts of its held-out evaluations.

    ``start_score`` is the start's held-out score (fixed seeds, so the same for every run: measured once).
    """
    base = {"env": env_id, "estimator": estimator, "seed": seed}
    evals = [{**base, "iter": 0, "eval_success": start_score["success_rate"], "eval_valid": start_score["valid_rate"],
              "eval_steps": start_score["mean_steps"]}]
    train_rows: list[dict[str, Any]] = []
    transcripts: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=f"llm-compare-{estimator}-") as out_dir:  # the run keeps no files
        config = TrainConfig(**run_settings(env_id, estimator, seed, start, args), **train_overrides(env_id, args),
                             out_dir=out_dir)
        trainer = Trainer(config)
        try:
            for it in range(config.iters):
                metrics = trainer.iterate(it)
                if args.train_transcripts:  # numbered as the training rows: the (it + 1)-th iteration's rollout
                    transcripts += [{**base, **row, "iter": it + 1, "phase": "train"}
                                    for row in trainer.last_transcript()]
                train_rows.append({**base, "iter": it + 1, "train_success": metrics["success_rate"],
                                   "train_valid": metrics["valid_rate"], "iteration_s": metrics["iteration_s"],
                                   "train_steps": metrics["steps"],
                                   **{k: metrics[k] for k in ("rollouts", "uniform_groups", "kept_groups")}})
                if (it + 1) % setting(env_id, args, "eval_every") == 0 or it + 1 == config.iters:
                    steps: list[dict[str, Any]] = []
                    score = held_out(trainer.policy, env_id, args, steps)
                    transcripts += [{**base, "iter": it + 1, "phase": "eval", **step} for step in steps]
                    evals.append({**base, "iter": it + 1, "eval_success": score["success_rate"],
                                  "eval_valid": score["valid_rate"], "eval_steps": score["mean_steps"]})
        finally:
            trainer.env.close()
    return {"rows": evals, "train": train_rows, "transcripts": transcripts}


def summarize(rows: list[dict[str, Any]], starts: dict[str, dict[str, Any]],
              train_rows: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The final-success table: per environment and estimator, mean ± std over seeds against the SFT start; when
    some run grew trees (``@tree``), the agent steps its rollouts played per iteration (mean over iterations and
    seeds), the budget both kinds of rollout are compared at."""
    trees = any(parse_label(r["estimator"])[1] == "tree" for r in rows)
    lines = ["| env | estimator | seeds | held-out success: start | final (mean ± std) | change | seeds above start |"
             + (" agent steps / iteration |" if trees else ""), "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if trees else "")]
    for env_id in dict.fromkeys(r["env"] for r in rows):
        start = starts[env_id]["start"]["success_rate"]
        for est in dict.fromkeys(r["estimator"] for r in rows if r["env"] == env_id):
            part = [r for r in rows if r["env"] == env_id and r["estimator"] == est]
            last = max(r["iter"] for r in part)
            final = np.array([r["eval_success"] for r in part if r["iter"] == last])
            std = final.std(ddof=1) if len(final) > 1 else 0.0
            line = (f"| {env_id} | {est} | {len(final)} | {start:.3f} | {final.mean():.3f} ± {std:.3f} | "
                    f"{final.mean() - start:+.3f} | {int((final > start).sum())} of {len(final)} |")
            if trees:
                steps = [float(r["train_steps"]) for r in train_rows
                         if r["env"] == env_id and r["estimator"] == est and r.get("train_steps") not in (None, "")]
                line += f" {np.mean(steps):.1f} |" if steps else " – |"
            lines.append(line)
    return lines


def _mean_curve(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    iters = sorted({r["iter"] for r in rows})
    return iters, [float(np.mean([r[key] for r in rows if r["iter"] == i])) for i in iters]


def plot(rows: list[dict[str, Any]], starts: dict[str, dict[str, Any]], path: Path,
         train_rows: list[dict[str, Any]] | None = None) -> None:
    """Held-out success (top) and sampled training success (bottom, when given) per estimator, mean over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    envs = list(dict.fromkeys(r["env"] for r in rows))
    panels = 2 if train_rows else 1
    fig, axes = plt.subplots(panels, len(envs), figsize=(6 * len(envs), 4 * panels), squeeze=False)
    for col, env_id in enumerate(envs):
        ax = axes[0][col]
        for est in dict.fromkeys(r["estimator"] for r in rows if r["env"] == env_id):
            ax.plot(*_mean_curve([r for r in rows if r["env"] == env_id and r["estimator"] == est], "eval_success"),
                    marker="o", label=est)
        ax.axhline(starts[env_id]["start"]["success_rate"], color="grey", ls="--", label="SFT start")
        ax.set(title=f"{env_id}: held-out", xlabel="training iteration", ylabel="held-out success")
        ax.legend(fontsize=8)
        if train_rows:
            ax, windows = axes[1][col], []
            for est in dict.fromkeys(r["estimator"] for r in train_rows if r["env"] == env_id):
                part = [r for r in train_rows if r["env"] == env_id and r["estimator"] == est
                        and r["train_success"] is not None  # iteration 0 is the start: no training rollout
                        and np.isfinite(float(r["train_success"]))]
                if not part:
                    continue
                iters, mean = _mean_curve(part, "train_success")
                # each iteration draws new tasks, whose difficulty dominates: a running mean once there are enough
                window = SMOOTH if len(mean) >= SMOOTH else 1
                smooth = np.convolve(mean, np.ones(window) / window, mode="valid")
                ax.plot(iters[window - 1:], smooth, marker="o" if len(smooth) < 5 else None, label=est)
                windows.append(window)
            smoothing = f"{max(windows)}-iteration mean" if windows and max(windows) > 1 else "per iteration"
            ax.set(title=f"{env_id}: training rollouts (T = 1, {smoothing})",
                   xlabel="training iteration", ylabel="training success")
            ax.legend(fontsize=8)
    for ax in axes.ravel():  # whole iterations; success rates with at least ±0.05 around the data
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        low, high = ax.get_ylim()
        ax.set_ylim(max(-0.02, min(low, (low + high) / 2 - 0.05)), min(1.02, max(high, (low + high) / 2 + 0.05)))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    with open(path, "w", newline="") as f:
        # merged comparisons may be older than a column: it stays empty for their rows
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)), restval="")
        writer.writeheader()
        writer.writerows(rows)


def write_results(stem: str, rows: list[dict[str, Any]], train_rows: list[dict[str, Any]],
                  starts: dict[str, dict[str, Any]], settings: dict[str, Any], elapsed: float,
                  load: Sequence[float], flags: str, transcripts: Sequence[dict[str, Any]] = (),
                  finished: tuple[int, int] | None = None, echo: bool = True,
                  merged: Sequence[str] = ()) -> None:
    """Write ``<stem>_curves.csv``, ``<stem>_train.csv``, ``<stem>.json``, ``<stem>.png``, ``<stem>.md`` and
    ``<stem>_transcripts.jsonl`` (when ``transcripts`` has steps); print the Markdown when ``echo``.

    ``finished`` = (runs done, runs in all): below all, the report says it is partial (it is rewritten as
    runs finish, so a comparison stopped early keeps the runs it finished). ``merged``: the report combines
    earlier comparisons (:func:`merge`), one Markdown line each, in place of the command line's paragraph.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    if transcripts:
        with open(RESULTS / f"{stem}_transcripts.jsonl", "w") as f:
            f.writelines(json.dumps(step, ensure_ascii=False) + "\n" for step in transcripts)
    _write_csv(RESULTS / f"{stem}_curves.csv", rows)
    _write_csv(RESULTS / f"{stem}_train.csv", train_rows)
    (RESULTS / f"{stem}.json").write_text(json.dumps(
        {"settings": settings, "sft": starts, "rows": rows, "train": train_rows, "elapsed_s": elapsed,
         "load_average_start": list(load), "runs_finished": list(finished) if finished else None}, indent=2,
        default=float))
    plot(rows, starts, RESULTS / f"{stem}.png", train_rows)
    evaluation = ("greedy" if settings["eval_temperature"] == 0 else
                  f"sampled at T = {settings['eval_temperature']:g} with fixed seeds")
    text = ["# LLM policy: credit estimators from an SFT start", ""]
    if merged:
        text += [f"`python benchmarks/llm_compare.py {flags}`: {len(merged)} comparisons from the same start and "
                 f"settings, combined ({elapsed / 60:.1f} min in all); {settings['seeds']} seed(s); held-out "
                 f"success {evaluation}.", "", *merged, ""]
    else:
        text += [f"`python benchmarks/llm_compare.py {flags}`: {elapsed / 60:.1f} min on {os.cpu_count()} cores of "
                 f"{settings['cpu']}" + (f" with one {settings['gpu']}" if settings.get("gpu") else "") + " "
                 f"({settings['jobs']} worker process(es), load average {load[0]:.1f} at the start); "
                 f"{settings['seeds']} seed(s); held-out success {evaluation}.", ""]
    if finished and finished[0] < finished[1]:
        text += [f"**Partial: {finished[0]} of {finished[1]} runs had finished when this was written.**", ""]
    for env_id, rec in starts.items():
        s = rec["settings"]
        origin = (f"given folder {rec['given']}" if "given" in rec else
                  f"oracle success {rec['oracle']['oracle_success']:.2f} over {rec['oracle']['steps']:.0f} labelled "
                  f"steps, {len(rec['epochs'])} SFT epoch(s)" + (f", kept in {rec['saved']}" if "saved" in rec else ""))
        dtype = s.get("dtype", s["precision"])  # what "auto" resolved to; absent from older comparisons
        precision = s["precision"] if dtype == s["precision"] else f"{s['precision']}: {dtype}"
        text.append(f"- **{env_id}**: model {s['model']}" + (f" + LoRA {s['lora']}" if s["lora"] else "")
                    + f" ({precision}), {s['groups']} groups × {s['group_size']} members, {s['iters']} "
                    f"iterations at lr {s['lr']:g}, KL {s['kl_coef']:g}"
                    + ("" if s.get("loss_agg", "auto") == "auto" else f", loss {s['loss_agg']}")
                    + ("" if s.get("penalty_credit", "return") == "return" else
                       ", invalid-action penalty charged to its row")
                    + ("" if s.get("temperature", 1.0) == 1.0 else f", training rollouts sampled at T = {s['temperature']:g}")
                    + ("" if not s.get("filter_groups") else
                       f", groups whose members all won or all lost replaced by fresh tasks (DAPO's dynamic "
                       f"sampling, at most {s['filter_max_rollouts']} rollouts per iteration)")
                    + ("" if not any(parse_label(r["estimator"])[1] == "tree" for r in rows if r["env"] == env_id) else
                       f"; the `@tree` runs grow {s['trees']} trees per task on its {s['group_size']} members ("
                       + (f"{s['expand_nodes']} random nodes per tree and round, Tree-GRPO's schedule, "
                          + (f"{s['expand_rounds']} round(s)" if s["expand_rounds"] else "rounds until the budget is spent")
                          if s["tree_schedule"] == "fixed" else "ARPO's entropy-triggered forks")
                       + (f", at most {s['step_budget']} agent steps per task" if s["step_budget"] else "") + ")")
                    + f", held-out tasks {s['eval_episodes']}, environment "
                    f"{json.dumps(s['env'])}. SFT start ({origin}): held-out success "
                    f"{rec['start']['success_rate']:.3f}, valid-format rate {rec['start']['valid_rate']:.3f}.")
    text += ["", *summarize(rows, starts, train_rows), ""]
    (RESULTS / f"{stem}.md").write_text("\n".join(text))
    if echo:
        print("\n".join(text))


MUST_AGREE = ("eval_temperature", "eval_every", "transcripts", "param", "train", "grad_accum")
"""Top-level settings that change a run's result or its report: comparisons merge only where they agree (the
per-environment settings and the SFT start must agree too)."""


def _agreeing(settings: dict[str, Any], key: str) -> Any:
    """The value of :data:`MUST_AGREE`'s ``key`` that two comparisons must share. Of ``--train``, only the fields
    that are not recorded per environment: those (:data:`RECORDED_TRAIN_FIELDS`) are compared there as the values
    the runs used, whether a flag or the environment's ``"train"`` settings gave them."""
    value = settings.get(key)
    if key == "train":
        value = [list(pair) for pair in value or () if pair[0] not in RECORDED_TRAIN_FIELDS]
    return value


def _differences(theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    """``key: theirs vs ours`` for each key whose values differ; a key one side lacks is "not recorded"
    (``dtype`` is missing from comparisons written before the resolved precision was recorded)."""
    def shown(d: dict[str, Any], key: str) -> str:
        return repr(d[key]) if key in d else "not recorded"
    keys = sorted(k for k in {*theirs, *ours} if theirs.get(k, ...) != ours.get(k, ...))
    return "; ".join(f"{k}: {shown(theirs, k)} vs {shown(ours, k)}" for k in keys)


def merge(paths: Sequence[str | Path], stem: str, flags: str) -> None:
    """Combine comparisons written by this script (their ``<stem>.json``, ``<stem>_transcripts.jsonl`` beside it)
    into one report, e.g. seeds run on different machines or at different times.

    They must share the SFT start (its held-out success and valid-format rate per environment), the environment
    settings and :data:`MUST_AGREE`; otherwise this raises ``ValueError`` naming what differs. A run (environment,
    estimator, seed) found in more than one file is kept from the first, and the report says whether the
    repeats reproduced its held-out curve exactly.
    """
    reports = []
    for path in map(Path, paths):
        if not path.is_file():
            raise ValueError(f"--merge {path}: no such file (give the .json a comparison wrote)")
        reports.append((path, json.loads(path.read_text())))
    first_path, first = reports[0]
    starts: dict[str, dict[str, Any]] = {}
    for path, report in reports:
        for key in MUST_AGREE:
            if _agreeing(report["settings"], key) != _agreeing(first["settings"], key):
                raise ValueError(f"--merge: {path.name} and {first_path.name} differ in {key} "
                                 f"({report['settings'].get(key)!r} vs {first['settings'].get(key)!r})")
        for env_id, rec in report["sft"].items():
            for name in RECORDED_TRAIN_FIELDS:  # files written before one was recorded used the trainer's default
                rec["settings"].setdefault(name, getattr(TrainConfig, name))
            kept = starts.setdefault(env_id, rec)
            for key, value in (("settings", rec["settings"]),
                               ("start", {k: rec["start"][k] for k in ("success_rate", "valid_rate")})):
                mine = kept[key] if key == "settings" else {k: kept["start"][k] for k in value}
                if mine != value:
                    raise ValueError(f"--merge: {path.name} has another {env_id} {key} than the files before it "
                                     f"({_differences(value, mine)}); only comparisons from the same start merge")
    rows: list[dict[str, Any]] = []
    train: list[dict[str, Any]] = []
    transcripts: list[dict[str, Any]] = []
    curves: dict[tuple[str, str, int], list[float]] = {}
    lines, repeats = [], []
    for path, report in reports:
        runs: dict[tuple[str, str, int], list[float]] = {}
        for row in report["rows"]:
            runs.setdefault((row["env"], row["estimator"], row["seed"]), []).append(row["eval_success"])
        new = {run for run in runs if run not in curves}
        for run in sorted(set(runs) - new):
            same = "the same held-out curve" if runs[run] == curves[run] else (
                f"a different held-out curve ({' '.join(f'{x:.3f}' for x in runs[run])} vs "
                f"{' '.join(f'{x:.3f}' for x in curves[run])}; the first is kept)")
            repeats.append(f"- {run[1]} seed {run[2]} ({run[0]}) is in {path.name} again: {same}.")
        curves.update({run: runs[run] for run in new})
        rows += [r for r in report["rows"] if (r["env"], r["estimator"], r["seed"]) in new]
        train += [r for r in report["train"] if (r["env"], r["estimator"], r["seed"]) in new]
        steps = path.with_name(path.stem + "_transcripts.jsonl")
        if steps.is_file():
            for line in steps.read_text().splitlines():
                step = json.loads(line)
                if (step["estimator"] == "start" and path == first_path) or \
                        (step["env"], step["estimator"], step["seed"]) in new:
                    transcripts.append(step)
        s = report["settings"]
        done = report.get("runs_finished") or [len(runs)] * 2
        lines.append(f"- `{path.name}`: {len(new)} run(s) taken ({', '.join(sorted({r[1] for r in new}))}; seeds "
                     f"{', '.join(map(str, sorted({r[2] for r in new})))}), {done[0]} of {done[1]} finished, "
                     f"{report['elapsed_s'] / 60:.1f} min on {s['cpu']}"
                     + (f" with one {s['gpu']}" if s.get("gpu") else "") + f", {s['jobs']} worker process(es).")
    order = {est: i for i, est in enumerate(ORDER)}
    key = lambda r: (r["env"], order.get(r["estimator"], len(order)), r["estimator"], r["seed"], r["iter"])  # noqa: E731
    rows.sort(key=key)
    train.sort(key=key)
    settings = {**first["settings"], "estimators": sorted({r[1] for r in curves}, key=lambda e: order.get(e, 99)),
                "seeds": len({r[2] for r in curves}), "merged": [str(p) for p, _ in reports]}
    write_results(stem, rows, train, starts, settings, sum(r["elapsed_s"] for _, r in reports),
                  first["load_average_start"], flags, transcripts, merged=lines + repeats)


def env_settings(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """The settings a run on ``env_id`` uses (for the report).

    ``dtype`` is what ``precision`` resolves to on this machine ("auto" is bf16 only where the CPU or GPU has
    native bf16), so comparisons run in different precisions do not merge; ``penalty_credit`` is whom the
    invalid-action penalty is charged to (``--train penalty_credit=row`` charges it to the malformed response
    alone, as verl-agent does; comparisons written before the choice existed charged it to the return, which
    :func:`merge` assumes where it is not recorded); likewise the training ``temperature`` and DAPO's
    ``filter_groups`` (``--train filter_groups=true``), which earlier comparisons did not change.
    """
    names = ("model", "lora", "precision", "groups", "group_size", "iters", "lr", "kl_coef", "loss_agg",
             "micro_batch_size", "eval_episodes", "max_new_tokens")
    values = {n: setting(env_id, args, n) for n in names}
    train = train_overrides(env_id, args)
    return {**values, "dtype": resolve_precision(values["precision"], resolve_device("auto")),
            **{name: train.get(name, getattr(TrainConfig, name)) for name in RECORDED_TRAIN_FIELDS},
            "env": env_kwargs(env_id, args)}


def _exit_with_parent(parent: int, interval_s: float = 2.0) -> None:
    """In a worker: end this process once ``parent`` (the pid of the process that started it) is no longer its
    parent (a killed parent would leave it running)."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(1)

    if os.getppid() != parent:  # the parent died before this worker got here
        os._exit(1)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _run_job(job: tuple[Any, ...]) -> dict[str, list[dict[str, Any]]]:
    torch.set_num_threads(1)
    return run_one(*job)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS))
    parser.add_argument("--estimators", nargs="+", default=None,
                        help="run labels ESTIMATOR[@tree][:KEY=VALUE,...] (default: the seven of ESTIMATORS on "
                             "chains; --quick: three); ESTIMATOR is a registered name or hgpo, empg_grpo, empg_gigpo "
                             "(EMPG over grpo / gigpo)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed0", type=int, default=0, help="the first training seed")
    parser.add_argument("--sft-seed", type=int, default=0,
                        help="seed of the oracle data and the SFT start (independent of --seed0, so that "
                             "--seed0 K --seeds 1 repeats seed K of a comparison from the same start)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--lora", type=int, default=0)
    parser.add_argument("--precision", default="float32", choices=PRECISIONS)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--kl-coef", type=float, default=0.01,
                        help="k3 KL to the SFT start (verl-agent's kl_loss_coef; 0 lets the format collapse, see above)")
    parser.add_argument("--loss-agg", default="auto", choices=("auto", *AGGREGATIONS),
                        help="agc train --loss-agg: the loss averaged per token, per step or per trajectory")
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=8, help="environment max_steps (0 = its default)")
    parser.add_argument("--max-solution-steps", type=int, default=0,
                        help="Sokoban: only rooms solvable in at most this many moves (0 = any room)")
    parser.add_argument("--eval-episodes", type=int, default=128)
    parser.add_argument("--eval-temperature", type=float, default=0.4,
                        help="held-out sampling temperature (verl-agent's validation: 0.4; 0 = greedy)")
    parser.add_argument("--sft-episodes", type=int, default=128)
    parser.add_argument("--sft-max-epochs", type=int, default=12)
    parser.add_argument("--sft-lr", type=float, default=2e-3)
    parser.add_argument("--sft-batch-size", type=int, default=16)
    parser.add_argument("--sft-target", type=float, default=0.2)
    parser.add_argument("--sft-epsilon", type=float, default=0.2, help="ε of the oracle data")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes for the runs (0 = one per core)")
    parser.add_argument("--num-threads", type=int, default=0, help="torch threads with --jobs 1 (0 = all cores)")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--start", default=None,
                        help="an SFT model folder to start from (skips the warm start; its held-out success is measured)")
    parser.add_argument("--save-start", default=None, metavar="DIR",
                        help="keep the SFT start in DIR/sft-<env id> (for --start later); by default it is trained "
                             "in a temporary folder that is removed at the end")
    parser.add_argument("--param", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                        help="an estimator parameter for every run (agc train --param), e.g. norm=none")
    parser.add_argument("--train", action="append", type=key_value, default=[], metavar="FIELD=VALUE",
                        help="a TrainConfig field for every run that no flag here sets, e.g. critic_steps=5")
    parser.add_argument("--transcripts", type=int, default=8,
                        help="held-out tasks per evaluation whose steps go to <stem>_transcripts.jsonl (0 = none)")
    parser.add_argument("--train-transcripts", action="store_true",
                        help="also write every training rollout's steps with their advantages (phase 'train')")
    parser.add_argument("--stem", default="llm_compare")
    parser.add_argument("--quick", action="store_true", help="smoke test: Sokoban, 1 seed, 2 iterations, 3 estimators")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="run nothing: combine comparisons this script wrote (same start and settings, e.g. "
                             "seeds run elsewhere) into <stem>.*")
    args = parser.parse_args(argv)
    given = list(argv if argv is not None else sys.argv[1:])
    if args.merge:
        try:
            merge(args.merge, args.stem, " ".join(given))
        except ValueError as exc:
            parser.error(str(exc))
        return 0
    args.explicit = {a.lstrip("-").split("=")[0].replace("-", "_") for a in given if a.startswith("--")}
    if args.quick:
        args.seeds, args.iters, args.eval_every, args.eval_episodes = 1, 2, 1, 32
        args.explicit |= {"iters", "eval_every", "eval_episodes"}
        if "envs" not in args.explicit:
            args.envs = ["Sokoban-Group-v0"]
        if args.estimators is None:
            args.estimators = ["grpo", "gigpo", "step_gae"]
        args.stem = args.stem + "_quick" if args.stem == "llm_compare" else args.stem
    args.estimators = args.estimators or list(ESTIMATORS)
    free = {f.name for f in fields(TrainConfig)} - {"out_dir"} - set(run_settings(args.envs[0], "grpo", 0, "", args))
    for name, _ in args.train:
        if name not in free:
            parser.error(f"--train {name}=...: not a TrainConfig field this script leaves free (one of {sorted(free)})")
    base = args.start or args.model  # the runs start from the SFT start of this model (made below) or --start
    for env_id in args.envs:  # a wrong estimator, parameter or missing model fails here, not after the warm start
        for est in args.estimators:
            try:
                TrainConfig(**run_settings(env_id, est, 0, base, args), **train_overrides(env_id, args)).validate()
            except (TypeError, ValueError) as exc:
                parser.error(str(exc))
    if args.save_start and args.start:
        parser.error("--save-start keeps the SFT start this script trains; with --start there is none")
    if args.save_start:
        for env_id in args.envs:
            folder = Path(args.save_start) / f"sft-{env_id}"
            if folder.is_dir() and any(folder.iterdir()):
                parser.error(f"--save-start: {folder} exists and is not empty (another comparison's start?)")
    args.jobs = args.jobs or (os.cpu_count() or 1)
    work = Path(args.save_start) if args.save_start else Path(tempfile.mkdtemp(prefix="llm-compare-"))
    try:
        return compare(args, given, work)
    finally:
        if not args.save_start:  # the SFT start, unless asked to keep it
            shutil.rmtree(work, ignore_errors=True)


def compare(args: argparse.Namespace, given: list[str], work: Path) -> int:
    """Warm-start (in ``work``) or load the start of every environment, run every estimator and seed, and write
    the results (after each run, and once more at the end)."""
    began, load = time.perf_counter(), os.getloadavg()
    starts: dict[str, dict[str, Any]] = {}
    jobs: list[tuple[Any, ...]] = []
    for env_id in args.envs:
        folder = work / f"sft-{env_id}"
        if args.start:
            folder = Path(args.start)
            policy = load_policy(str(folder), precision=setting(env_id, args, "precision"), device=resolve_device("auto"))
            steps: list[dict[str, Any]] = []
            starts[env_id] = {"env": env_id, "given": str(folder), "epochs": [],
                              "start": held_out(policy, env_id, args, steps), "transcripts": steps}
        else:
            starts[env_id] = warm_start(env_id, args, folder)
            if args.save_start:
                starts[env_id]["saved"] = str(folder)
        starts[env_id]["settings"] = env_settings(env_id, args)
        jobs += [(env_id, est, seed, str(folder), args, starts[env_id]["start"])
                 for est in args.estimators for seed in range(args.seed0, args.seed0 + args.seeds)]
    start_transcripts = [{"env": env_id, "estimator": "start", "seed": None, "iter": 0, "phase": "eval", **step}
                         for env_id, rec in starts.items() for step in rec.pop("transcripts", [])]
    settings = {**{k: v for k, v in vars(args).items() if k not in ("cache_dir", "explicit")},
                "env_settings": {env_id: ENV_SETTINGS.get(env_id, {}) for env_id in args.envs}, "cpu": cpu_model(),
                "gpu": accelerator()}
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}

    def save(final: bool) -> None:
        done = [results[i] for i in sorted(results)]  # in job order, whatever order they finished in
        write_results(args.stem, [r for out in done for r in out["rows"]],
                      [r for out in done for r in out["train"]], starts, settings, time.perf_counter() - began, load,
                      " ".join(given), start_transcripts + [step for out in done for step in out["transcripts"]],
                      finished=(len(results), len(jobs)), echo=final)

    bar = tqdm(total=len(jobs), desc="runs (estimator × seed)", unit="run", dynamic_ncols=True)
    if args.jobs > 1 and len(jobs) > 1:
        here = str(Path(__file__).resolve().parent)
        if here not in sys.path:  # spawned workers unpickle _run_job by importing this script as a module
            sys.path.insert(0, here)
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_exit_with_parent, initargs=(os.getpid(),)) as pool:
            futures = {pool.submit(_run_job, job): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.update(1)
                if len(results) < len(jobs):
                    save(final=False)
    else:
        torch.set_num_threads(args.num_threads or os.cpu_count() or 1)
        for i, job in enumerate(jobs):
            results[i] = run_one(*job)
            bar.update(1)
            if len(results) < len(jobs):
                save(final=False)
    bar.close()
    save(final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
