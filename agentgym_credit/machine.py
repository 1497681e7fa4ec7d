"""What a benchmark or evaluation ran on: the CPU model, cores, OS and Python, for its report.

Results measured on one CPU are not always reproduced on another (kernels round differently, and speeds
differ), so every report names the CPU it ran on.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["accelerator", "cpu_flags", "cpu_has_native_bf16", "cpu_model", "free_cores", "machine_summary"]


def _cpuinfo_value(key: str, cpuinfo: str | Path) -> str | None:
    """The value of the first ``key : value`` line of ``cpuinfo`` (Linux), or None where there is none."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                name, sep, value = line.partition(":")
                if sep and name.strip() == key:
                    return value.strip()
    except OSError:
        pass
    return None


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's model name (Linux: the first ``model name`` of ``cpuinfo``), else what ``platform`` says."""
    return _cpuinfo_value("model name", cpuinfo) or platform.processor() or platform.machine()


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (Linux: the first ``flags`` line of ``cpuinfo``); empty where it cannot be read."""
    return frozenset((_cpuinfo_value("flags", cpuinfo) or "").split())


def cpu_has_native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether the CPU does bf16 arithmetic natively: AMX-BF16 or AVX512-BF16 among its :func:`cpu_flags`.

    Without them PyTorch emulates bf16 on the CPU, several times slower than float32 (about 7× for the
    MiniLM sentence encoder on a 2-core AVX2 EPYC), so bf16 only pays off where this is True.
    """
    return bool({"amx_bf16", "avx512_bf16"} & cpu_flags(cpuinfo))


def accelerator() -> str | None:
    """The GPU that torch computes on (``<name>, CUDA <version>, torch <version>``), or None without one.

    Imports torch only where it is installed; a CPU-only build, or no visible device, gives None.
    """
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return f"{torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}, torch {torch.__version__}"


def machine_summary(load: bool = False) -> str:
    """``<CPU model>, <n> cores[, load average x], <system> <release>, Python <version>``.

    Args:
        load: add the one-minute load average (how busy the machine was when a timed run started).
    """
    busy = f", load average {os.getloadavg()[0]:.1f}" if load and hasattr(os, "getloadavg") else ""
    return (f"{cpu_model()}, {os.cpu_count()} cores{busy}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def free_cores() -> int:
    """CPU cores available to this process and not busy with other work (at least 1): the cores of its
    affinity mask less the one-minute load average, rounded."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        busy = int(round(os.getloadavg()[0]))
    except OSError:
        busy = 0
    return max(1, min(cores, cores - busy))
