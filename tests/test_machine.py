"""The kernel pin sets every variable that selects CPU kernels, whatever the caller's shell had."""

from __future__ import annotations

import pytest

from toolcall_repro import machine


def test_a_pin_overrides_the_callers_shell_and_native_clears_it():
    env = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO", "NPY_DISABLE_CPU_FEATURES": "AVX2", "PATH": "/bin"}
    chosen = machine.pin_kernels("avx2", env)
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["MKL_CBWR"] == "AVX2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["PATH"] == "/bin"
    assert set(chosen) <= set(env)
    # numpy's AVX-512 loops are disabled by their names in the installed numpy, and nothing else of numpy's
    disabled = env.get("NPY_DISABLE_CPU_FEATURES", "").split()
    assert disabled == [t for t in machine.numpy_targets() if t.startswith("AVX512")]
    machine.pin_kernels("native", env)
    assert not any(v in env for v in machine.PINNED_VARS)


def test_an_unknown_capability_names_the_key_and_what_is_allowed():
    with pytest.raises(machine.KernelPinError, match=r"engines.cpu_capability: 'sse9' is not one of \['default', 'avx2', 'avx512', 'native'\]"):
        machine.pin_kernels("sse9", {})


def test_a_capability_the_cpu_lacks_fails_the_check(monkeypatch):
    import torch

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: False)
    with pytest.raises(machine.KernelPinError, match="'avx512' was asked for"):
        machine.check_kernels("avx512")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    with pytest.raises(machine.KernelPinError, match="torch runs 'default' kernels"):
        machine.check_kernels("avx2")
    machine.check_kernels("native")  # native accepts whatever the machine runs


def test_machine_facts_name_the_environment():
    facts = machine.machine_facts({"cpu_capability": "avx2", "threads": 1})
    assert facts["cpu_capability"] == "avx2" and facts["threads"] == 1
    assert len(facts["distributions_sha256"]) == 64 and facts["distributions"] > 10
    assert any(d.startswith("pyyaml==") for d in machine.installed_distributions())


def test_mkl_runs_an_isa_branch_on_intel_only():
    """MKL takes MKL_CBWR=AVX2 (or AVX512) on Intel CPUs only and runs its AUTO branch elsewhere; only
    COMPATIBLE is one branch on every vendor; unset, MKL follows the machine. Records from before the
    vendor was recorded are read from the CPU model."""
    pinned = machine.KERNEL_ENV["avx2"]
    assert machine.mkl_branch(pinned, "GenuineIntel") == "avx2"
    assert machine.mkl_branch(pinned, "AuthenticAMD") == "auto"
    assert machine.mkl_branch({"MKL_CBWR": "AVX512,STRICT"}, "GenuineIntel") == "avx512"
    for vendor in ("GenuineIntel", "AuthenticAMD"):
        assert machine.mkl_branch(machine.KERNEL_ENV["default"], vendor) == "compatible"
        assert machine.mkl_branch({}, vendor) == "native"
    assert machine.mkl_branch(pinned, "", "AMD EPYC") == "auto"
    assert machine.mkl_branch(pinned, "", "Intel(R) Xeon(R) Processor") == "avx2"


def test_machine_facts_record_the_vendor_and_the_mkl_branch(monkeypatch):
    machine.pin_kernels("avx2", env := {})
    monkeypatch.setattr(machine.os, "environ", env)
    facts = machine.machine_facts({"cpu_capability": "avx2"})
    assert facts["cpu_vendor"] == machine.cpu_vendor()
    assert facts["mkl_branch"] == machine.mkl_branch(env, machine.cpu_vendor())
    assert facts["mkl_branch"] in ("avx2", "auto")
