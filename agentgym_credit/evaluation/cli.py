"""``agc eval``: evaluate a policy on an environment's evaluation split.

Examples::

    agc eval --env ALFWorld-Group-v0 --split valid_unseen --policy oracle        # ~1 min
    agc eval --env Sokoban-Group-v0 --policy random --episodes 256                # ~5 s
    agc eval --env Sokoban-Group-v0 --policy runs/gigpo --temperature 0
    agc eval --env Sokoban-Group-v0 --policy runs/gigpo --env-kwarg max_solution_steps=2   # easier rooms
    agc eval --env SearchQA-Group-v0 --policy mypackage.agent:respond             # prompts -> responses
    agc eval --env AppWorld-Group-v0 --split test_normal --policy oracle          # TGC / SGC, ~1 min

Writes ``<out-dir>/eval_<env>_<split>_<policy>.{json,md}`` and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentgym_credit.cli_args import key_value
from agentgym_credit.evaluation.protocols import PROTOCOLS, EvaluationUnavailable
from agentgym_credit.evaluation.runner import evaluate

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``agc eval`` argument parser."""
    p = argparse.ArgumentParser(prog="agc eval", description="evaluate a policy with the papers' metrics")
    p.add_argument("--env", required=True, help=f"one of {', '.join(PROTOCOLS)}")
    p.add_argument("--policy", required=True,
                   help="random | oracle | model folder, name (tiny, smollm2) or agc train/sft run folder | module:function")
    p.add_argument("--split", default=None, help="evaluation split (default: the protocol's first)")
    p.add_argument("--episodes", type=int, default=None, help="first N tasks of the split (default: all)")
    p.add_argument("--samples", type=int, default=1, help="runs per task (group size)")
    p.add_argument("--batch-size", type=int, default=16, help="tasks played at once")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=None, help="default: the papers' episode length")
    p.add_argument("--env-kwarg", dest="env_kwargs", action="append", type=key_value, default=[], metavar="KEY=VALUE",
                   help="environment argument, e.g. max_solution_steps=2 (repeatable; recorded in the results)")
    p.add_argument("--temperature", type=float, default=0.0, help="model sampling temperature; 0 = greedy")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--device", default="cpu")
    # the values of baselines.policy.PRECISIONS, spelled out: this parser must not import torch to start
    p.add_argument("--precision", choices=("auto", "float32", "bfloat16"), default="float32",
                   help="model forward passes: float32, bfloat16 autocast, or auto (bf16 where the CPU/GPU has it)")
    p.add_argument("--out-dir", type=Path, default=Path("eval_results"))
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``agc eval``; returns the exit status (2 when the environment cannot be evaluated here)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    env_kwargs = dict(args.env_kwargs)
    if "max_steps" in env_kwargs:  # --env-kwarg max_steps=N is --max-steps N
        if args.max_steps is not None and args.max_steps != env_kwargs["max_steps"]:
            parser.error("--max-steps and --env-kwarg max_steps= disagree")
        args.max_steps = int(env_kwargs.pop("max_steps"))
    try:
        result = evaluate(args.policy, args.env, args.split, episodes=args.episodes, samples=args.samples,
                          batch_size=args.batch_size, seed=args.seed, max_steps=args.max_steps,
                          temperature=args.temperature, max_new_tokens=args.max_new_tokens, device=args.device,
                          precision=args.precision, progress=not args.no_progress, **env_kwargs)
    except EvaluationUnavailable as exc:
        print(f"agc eval: {exc}", file=sys.stderr)
        return 2
    json_path, md_path = result.write(args.out_dir)
    print(result.to_markdown())
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
