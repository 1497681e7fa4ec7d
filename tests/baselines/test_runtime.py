"""The trainers' linear layers on oneDNN (their default thread count, :func:`agentgym_credit.machine.free_cores`, is
tested in ``tests/test_machine.py``)."""

from __future__ import annotations

import copy

import pytest
import torch

from agentgym_credit.baselines.runtime import (
    OneDNNLinear,
    check_device,
    packed_copies,
    packed_linears,
    use_onednn_linears,
)

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


def test_nested_contexts_keep_the_packed_copies_until_the_outermost_exits():
    _, swapped = _pair(True)
    x = torch.randn(4, 48)
    with torch.inference_mode(), packed_linears(swapped):
        assert packed_copies(swapped) == {}
        with packed_linears(swapped):
            swapped(x)
            first = swapped._packed[2]
            packed_copies(swapped)["stacked"] = first
        assert swapped._packing and swapped._packed[2] is first  # the inner exit keeps them
        with packed_linears(swapped):
            swapped(x)
            assert swapped._packed[2] is first and packed_copies(swapped)["stacked"] is first  # not packed again
    assert swapped._packed is None and not swapped._packing and packed_copies(swapped) is None


# ----------------------------------------------------------------------------- the device a run asks for
@pytest.mark.parametrize("device", ["gpu", "cudafoo", "cuda:", "cuda:x", "cuda:0:1", "CPU"])
def test_check_device_refuses_what_is_not_a_device(device):
    with pytest.raises(ValueError, match=r"device must be 'auto', 'cpu' or 'cuda\[:N\]'"):
        check_device(device, "hf")


def test_check_device_refuses_a_cuda_index_beyond_the_visible_devices(monkeypatch):
    # a two-GPU machine as torch reports it: cuda:2 fails at the start of the run, not at the first tensor
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for fine in ("cuda", "cuda:0", "cuda:1", "auto", "cpu"):
        check_device(fine, "hf")
    with pytest.raises(ValueError, match=r"--device cuda:2 requested but 2 CUDA devices are visible \(cuda:0 to "
                                         r"cuda:1\)"):
        check_device("cuda:2", "hf")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match="but 1 CUDA device is visible"):
        check_device("cuda:1", "hf")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only case")
def test_check_device_names_the_fix_without_cuda():
    with pytest.raises(ValueError, match="use --device cpu"):
        check_device("cuda:0", "hf")
