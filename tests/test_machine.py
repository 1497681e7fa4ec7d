"""The machine description every report carries, and the trainers' default thread count (the cores idle now,
from two ``/proc/stat`` readings)."""

from __future__ import annotations

import os
import time

import pytest

from agentgym_credit import machine
from agentgym_credit.machine import (
    accelerator,
    cpu_flags,
    cpu_has_native_bf16,
    cpu_model,
    free_cores,
    machine_summary,
)


def test_cpu_model_reads_the_first_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: X\nmodel name\t: Example CPU 9000 @ 3.0GHz\n\n"
                    "processor\t: 1\nmodel name\t: Example CPU 9000 @ 3.0GHz\n")
    assert cpu_model(info) == "Example CPU 9000 @ 3.0GHz"


def test_cpu_model_without_cpuinfo_falls_back_to_platform(tmp_path):
    assert cpu_model(tmp_path / "missing")  # platform.processor() or platform.machine(), never empty


def test_native_bf16_needs_amx_or_avx512_bf16_in_the_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    for flags, native in (("fpu avx2 fma avx512f", False), ("fpu avx2 avx512f avx512_bf16", True),
                          ("fpu avx2 amx_bf16 amx_tile", True), ("fpu bf16", False)):
        info.write_text(f"processor\t: 0\nflags\t\t: {flags}\nbugs\t\t: spectre_v1\n")
        assert cpu_flags(info) == frozenset(flags.split())
        assert cpu_has_native_bf16(info) is native, flags
    assert cpu_flags(tmp_path / "missing") == frozenset() and not cpu_has_native_bf16(tmp_path / "missing")


def test_machine_summary_names_cpu_cores_and_load_on_request():
    text = machine_summary()
    assert text.startswith(cpu_model()) and f"{os.cpu_count()} cores" in text and "Python" in text
    assert "load average" not in text
    assert "load average" in machine_summary(load=True)


def test_accelerator_names_the_gpu_or_none():
    import torch

    name = accelerator()
    if torch.cuda.is_available():
        assert torch.cuda.get_device_name(0) in name and f"torch {torch.__version__}" in name
    else:
        assert name is None


def _stat(*cpus: tuple[int, int]) -> str:
    """A ``/proc/stat`` text whose CPU k spent ``cpus[k]`` = (busy, idle) ticks (split over the fields)."""
    busy_total = sum(b for b, _ in cpus)
    idle_total = sum(i for _, i in cpus)
    lines = [f"cpu  {busy_total} 0 0 {idle_total} 0 0 0 0 0 0"]
    for k, (busy, idle) in enumerate(cpus):
        # user nice system idle iowait irq softirq steal guest guest_nice: a tenth of the idle time is iowait,
        # a tenth of the busy time stolen by the hypervisor
        lines.append(f"cpu{k} {busy - 2 * (busy // 10)} 0 {busy // 10} {idle - idle // 10} {idle // 10} 0 0 "
                     f"{busy // 10} 7 0")
    return "\n".join(lines + ["intr 12345 0 0", "ctxt 999", "btime 1700000000", "procs_running 3"]) + "\n"


def _readings(*texts: str):
    it = iter(texts)
    return lambda: next(it)


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(machine, "_own_ticks", lambda: 0)  # this process ran nothing in the fixed readings' window


def test_this_processs_own_threads_do_not_count_as_another_jobs(two_cpus):
    before = _stat((100, 100), (100, 100))
    one_busy = _stat((110, 100), (100, 110))  # CPU 0 busy for the whole window...
    assert free_cores(0.0, _readings(before, one_busy), _readings(500, 510)) == 2  # ...with this process's threads
    assert free_cores(0.0, _readings(before, one_busy), _readings(500, 503)) == 1  # mostly another job's
    both = _stat((110, 100), (110, 100))  # both busy, this process 10 ticks of the 20: one core for it
    assert free_cores(0.0, _readings(before, both), _readings(0, 10)) == 1
    assert free_cores(0.0, _readings(before, both), _readings(0, 25)) == 2  # never more than the CPUs


def test_an_idle_machine_right_after_a_busy_minute_gives_every_core(two_cpus):
    # both CPUs were busy for a long time (the previous command: the load average still says so) but are idle now
    before = _stat((50_000, 1_000), (50_000, 1_000))
    after = _stat((50_000, 1_010), (50_000, 1_010))
    assert free_cores(0.0, _readings(before, after)) == 2


def test_cores_busy_now_are_not_taken(two_cpus):
    before = _stat((100, 100), (100, 100))
    one_busy = _stat((110, 100), (100, 110))  # CPU 0 busy for the whole window, CPU 1 idle
    assert free_cores(0.0, _readings(before, one_busy)) == 1
    both_busy = _stat((110, 100), (109, 101))
    assert free_cores(0.0, _readings(before, both_busy)) == 1  # never fewer than one
    mostly_idle = _stat((102, 108), (101, 109))  # 1.7 cores idle
    assert free_cores(0.0, _readings(before, mostly_idle)) == 2


def test_only_the_cpus_this_process_may_run_on_count(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1, 2}, raising=False)
    monkeypatch.setattr(machine, "_own_ticks", lambda: 0)
    before = _stat((0, 0), (0, 0), (0, 0), (0, 0))
    after = _stat((0, 10), (10, 0), (0, 10), (0, 10))  # CPUs 0, 2 and 3 idle, CPU 1 busy: one of ours is free
    assert free_cores(0.0, _readings(before, after)) == 1


def test_without_a_reading_every_core_is_taken(two_cpus):
    def unreadable() -> str:
        raise OSError("no /proc/stat here")

    assert free_cores(0.0, unreadable) == 2
    same = _stat((5, 5), (5, 5))
    assert free_cores(0.0, _readings(same, same)) == 2  # no tick elapsed between the readings


def test_the_real_reading_gives_a_core_count_in_range():
    if not os.path.exists("/proc/stat"):
        pytest.skip("no /proc/stat on this system")
    cores = len(os.sched_getaffinity(0))
    assert 1 <= free_cores() <= cores
    idle, total = machine._idle_and_total(machine._read_proc_stat(), set(os.sched_getaffinity(0)))
    assert 0 <= idle <= total and total > 0
    before = machine._own_ticks()
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # 50 ms of this process's own work
        pass
    assert machine._own_ticks() >= before + 2
