"""The trainers' default thread count: the cores idle now, measured from two ``/proc/stat`` readings."""

from __future__ import annotations

import os

import pytest

from agentgym_credit.baselines import runtime
from agentgym_credit.baselines.runtime import free_cores


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
    idle, total = runtime._idle_and_total(runtime._read_proc_stat(), set(os.sched_getaffinity(0)))
    assert 0 <= idle <= total and total > 0
