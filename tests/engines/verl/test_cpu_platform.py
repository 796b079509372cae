"""The CPU platform verl loads for train.verl.device: cpu (engines/verl/cpu_platform.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

from toolcall_repro.engines.verl import hydra  # noqa: E402
from toolcall_repro.engines.verl.cpu_platform import unique_backend  # noqa: E402


@pytest.mark.parametrize(
    "backend, expected",
    [
        ("cpu:gloo,cpu:gloo", "cpu:gloo"),
        ("cpu:gloo,cuda:nccl", "cpu:gloo,cuda:nccl"),
        ("gloo", "gloo"),
        (None, None),
    ],
)
def test_a_process_group_backend_names_each_device_once(backend, expected):
    assert unique_backend(backend) == expected


PROBE = """
import json, torch
import torch.distributed as dist
from verl.utils.device import get_device_name, get_nccl_backend, get_torch_device, get_device_id
from verl.plugin.platform import get_platform
from verl.utils.distributed import initialize_global_process_group_ray
import torch.distributed.fsdp as fsdp
dev = get_torch_device()
free, total = dev.mem_get_info()
initialize_global_process_group_ray(backend=None)
t = torch.ones(2).to(device=get_device_id())
dist.all_reduce(t)
print(json.dumps({
    "platform": type(get_platform()).__name__, "device": get_device_name(), "backend": get_nccl_backend(),
    "ipc": get_platform().is_ipc_supported(), "name": dev.get_device_name(), "memory": free <= total,
    "group": dist.get_backend(), "sum": t.tolist(), "pin": fsdp.CPUOffloadPolicy(pin_memory=True).pin_memory,
}))
"""


def test_verl_runs_on_the_cpu_platform_in_a_fresh_process():
    """As a Ray worker starts: the job's environment, then `import verl` (nothing else set up)."""
    env = {**os.environ, **hydra.device_environment({"device": "cpu"})}
    env.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29611", LOCAL_RANK="0")
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "platform": "PlatformCPU", "device": "cpu", "backend": "gloo", "ipc": False, "name": "cpu",
        "memory": True, "group": "cpu:gloo", "sum": [1.0, 1.0], "pin": False,
    }  # fmt: skip


def test_without_the_switch_the_platform_is_only_registered():
    """A GPU node imports the module (VERL_USE_EXTERNAL_MODULES unset: not even that); it is never detected."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_", "VLLM_"))}
    code = (
        "import torch.distributed as dist, torch.distributed.fsdp as fsdp\n"
        "import toolcall_repro.engines.verl.cpu_platform as c\n"
        "print(c.PlatformCPU().is_platform_available(True), fsdp.CPUOffloadPolicy().pin_memory,"
        " hasattr(dist.init_process_group, '_toolcall_cpu'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["False", "True", "False"]


AMX_PROBE = """
import ctypes, json, torch
import verl  # loads the CPU platform (VERL_USE_EXTERNAL_MODULES), as in every vLLM worker of a rollout
mask = ctypes.c_ulong(0)
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.syscall(158, 0x1022, ctypes.byref(mask))  # arch_prctl(ARCH_GET_XCOMP_PERM, &mask)
print(json.dumps({"rc": rc, "tiledata": bool(mask.value >> 18 & 1), "amx": torch.cpu._is_amx_tile_supported()}))
"""


def test_a_verl_process_may_run_amx_kernels_where_the_cpu_has_them():
    """vLLM's bf16 attention runs AMX kernels where the CPU has AMX and never asks Linux for the tile
    state; with the kernel pin (oneDNN capped at AVX2) nothing else asks, and the rollout's worker died of
    SIGILL on an Intel Xeon. Every process that imports verl on the CPU platform holds the permission
    where the CPU has AMX (on a CPU without AMX there is nothing to grant)."""
    env = {**os.environ, **hydra.device_environment({"device": "cpu"}), "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run([sys.executable, "-c", AMX_PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0 and got["tiledata"] == got["amx"], got
