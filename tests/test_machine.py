"""The machine description every report carries."""

from __future__ import annotations

import os

from agentgym_credit.machine import accelerator, cpu_flags, cpu_has_native_bf16, cpu_model, machine_summary


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
