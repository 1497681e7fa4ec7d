"""What a benchmark or evaluation ran on: the CPU model, cores, OS and Python, for its report.

Results measured on one CPU are not always reproduced on another (kernels round differently, and speeds
differ), so every report names the CPU it ran on.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["accelerator", "cpu_model", "machine_summary"]


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's model name (Linux: the first ``model name`` of ``cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
