"""What a benchmark or evaluation ran on: the CPU model, cores, OS and Python, for its report.

Results measured on one CPU are not always reproduced on another (kernels round differently, and speeds
differ), so every report names the CPU it ran on.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
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


def _own_ticks() -> int:
    """Clock ticks this process (all its threads) has run, user and system, from ``/proc/self/stat``."""
    with open("/proc/self/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the line)


def free_cores(window: float = 0.1, read_stat: Callable[[], str] = _read_proc_stat,
               own_ticks: Callable[[], int] | None = None) -> int:
    """CPU cores available to this process and idle now (at least 1): the default thread count of the trainers.

    The idle ticks of each CPU in the process's affinity mask are read from ``/proc/stat`` twice, ``window``
    seconds apart; the cores free are the sum of the CPUs' idle fractions, rounded, where the ticks this process
    ran in the window count as idle: they are its own threads (right after ``agc train`` started, one of its worker
    threads was busy for 50–60 ms of the 100 ms window; counted as another job's, that cost the trainer one of two
    cores). Two alternatives were rejected: the 1-minute load average decays over a minute, so right after a
    command it still counts that command's threads (an idle 2-core machine gave 1 thread for the next run); and
    every core, torch's own default, oversubscribes a machine shared with other jobs: intra-op OpenMP threads wait
    for each other at the end of every operation, so one thread that another job keeps off its core holds up every
    matrix product. Where ``/proc/stat`` cannot be read (macOS, Windows), every core is taken.

    Args:
        window: seconds between the two readings.
        read_stat: returns the text of ``/proc/stat`` (tests pass fixed readings).
        own_ticks: returns the ticks this process has run (default: from ``/proc/self/stat``; tests pass fixed
            readings).
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    own = own_ticks or _own_ticks
    try:
        idle0, total0 = _idle_and_total(read_stat(), set(cpus))
        mine0 = own()
        time.sleep(window)
        idle1, total1 = _idle_and_total(read_stat(), set(cpus))
        mine1 = own()
    except (OSError, ValueError, IndexError):
        return len(cpus)
    if total1 <= total0:  # no tick elapsed: nothing measured
        return len(cpus)
    idle = min(total1 - total0, (idle1 - idle0) + max(0, mine1 - mine0))
    free = len(cpus) * idle / (total1 - total0)
    return max(1, min(len(cpus), round(free)))
