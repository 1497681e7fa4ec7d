"""The trainers' default thread count (the cores idle now, from two ``/proc/stat`` readings) and their linear layers
on oneDNN."""

from __future__ import annotations

import copy
import os

import pytest
import torch

from agentgym_credit.baselines import runtime
from agentgym_credit.baselines.runtime import OneDNNLinear, free_cores, packed_linears, use_onednn_linears


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


# ----------------------------------------------------------------------------- linear layers on oneDNN
onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


def _pair(bias: bool) -> tuple[torch.nn.Linear, torch.nn.Linear]:
    torch.manual_seed(0)
    plain = torch.nn.Linear(48, 40, bias=bias)
    swapped = copy.deepcopy(plain)
    assert use_onednn_linears(swapped) == 1 and isinstance(swapped, OneDNNLinear)
    return plain, swapped


@onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(7, 48), (3, 5, 48)])
def test_onednn_linear_gives_torch_outputs_and_gradients(bias, shape):
    plain, swapped = _pair(bias)
    x = torch.randn(shape)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = plain(xa), swapped(xb)
    assert yb.shape == ya.shape and torch.allclose(yb, ya, rtol=1e-5, atol=1e-5)
    grad = torch.randn(ya.shape[::-1]).transpose(0, -1)  # a non-contiguous upstream gradient
    ya.backward(grad)
    yb.backward(grad)
    assert torch.allclose(xb.grad, xa.grad, rtol=1e-5, atol=1e-5)
    assert torch.allclose(swapped.weight.grad, plain.weight.grad, rtol=1e-5, atol=1e-4)
    if bias:
        assert torch.allclose(swapped.bias.grad, plain.bias.grad, rtol=1e-5, atol=1e-5)
    with torch.inference_mode():  # no autograd node without gradient
        assert torch.allclose(swapped(x), plain(x), rtol=1e-5, atol=1e-5)


@onednn
def test_onednn_linear_leaves_autocast_and_other_dtypes_to_torch():
    plain, swapped = _pair(True)
    x = torch.randn(4, 48)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # torch's own bf16 path: bit for bit the same
        assert swapped(x).dtype == torch.bfloat16 and torch.equal(swapped(x), plain(x))
    double = copy.deepcopy(swapped).double()
    assert torch.equal(double(x.double()), plain.double()(x.double()))
    assert swapped(torch.zeros(0, 48)).shape == (0, 40)


@onednn
def test_models_keep_their_state_and_copies_their_own_weights(cache_dir):
    from agentgym_credit.baselines.policy import load_policy

    policy = load_policy("tiny", cache_dir=cache_dir)
    model = policy.model
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(type(m) is OneDNNLinear for m in linears)
    reference = copy.deepcopy(model)  # the trainer's frozen reference: its own weights, still on oneDNN
    assert type(reference.lm_head) is OneDNNLinear and reference.lm_head.weight is not model.lm_head.weight
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)
    ids = torch.tensor([[3, 5, 7, 11]])
    with torch.inference_mode():
        assert not torch.allclose(model(ids).logits, reference(ids).logits)
    fresh = load_policy("tiny", cache_dir=cache_dir)
    assert fresh.model.state_dict().keys() == reference.state_dict().keys()


@onednn
def test_packed_weights_give_the_same_products_and_follow_weight_changes():
    plain, swapped = _pair(True)
    x = torch.randn(16, 48)
    with torch.inference_mode():
        dense = swapped(x)
        with packed_linears(swapped):
            assert torch.equal(swapped(x), dense) and swapped._packed is not None
            first = swapped._packed[2]
            assert torch.equal(swapped(x[:3]), dense[:3]) and swapped._packed[2] is first  # packed once
            swapped.weight.add_(1.0)  # an optimizer step: the packed copy is stale and is remade
            assert torch.allclose(swapped(x), plain(x) + x.sum(-1, keepdim=True), rtol=1e-5, atol=1e-4)
            assert swapped._packed[2] is not first
        assert swapped._packed is None and not swapped._packing  # the copy goes with the context
    with packed_linears(swapped):  # with gradient the autograd path runs, nothing is packed
        y = swapped(x.requires_grad_())
        assert y.requires_grad and swapped._packed is None
