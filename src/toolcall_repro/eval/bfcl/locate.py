"""Which `vllm` BFCL serves with: the vLLM environment's, since bfcl-eval's cannot hold vLLM (vLLM 0.24.0
needs numpy>=2, bfcl-eval pins 1.26.4).

At paper scale the workflow's `locate_vllm` job runs inside the vLLM env (eval-vllm.yaml, as Snakemake
deploys it under --sdm conda) and records that env's `vllm`; every `generate_bfcl` job, in the BFCL env,
serves with the recorded one. This module imports neither bfcl-eval nor vLLM: it runs in both envs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolcall_repro.io import atomic_write_json


class VLLMNotFound(RuntimeError):
    """No `vllm` executable to serve with: the BFCL env has no vLLM (numpy), the vLLM env must be named."""


def find_vllm(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(path, how it was found) of the `vllm` to serve with: `explicit`, else $VLLM_BIN, else the one beside
    $VERL_PYTHON, else the one beside this Python (the job's own env), else PATH's.

    VERL_PYTHON is the paper-scale training env (verl[vllm]: vLLM 0.24.0); VLLM_BIN names any other env's
    `vllm`. A named path that is not an executable is an error, never a silent fallback.
    """
    environ = os.environ if environ is None else environ
    candidates = [("--vllm-bin", explicit), ("VLLM_BIN", environ.get("VLLM_BIN"))]
    if environ.get("VERL_PYTHON"):
        candidates.append(("VERL_PYTHON", str(Path(environ["VERL_PYTHON"]).parent / "vllm")))
    for source, path in candidates:
        if not path:
            continue
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise VLLMNotFound(f"{source}: {path} is not an executable `vllm`")
        return str(Path(path).absolute()), source
    beside = Path(sys.executable).parent / "vllm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside), "this env"
    found = shutil.which("vllm", path=environ.get("PATH"))
    if found:
        return found, "PATH"
    raise VLLMNotFound(
        "BFCL with the vllm backend starts `vllm serve` from the vLLM environment, and none is named: "
        "export VLLM_BIN=/path/to/env/bin/vllm (or VERL_PYTHON=/path/to/.venv-verl/bin/python), or pass "
        "--server-url of a running server (docs/cluster.md)"
    )


def vllm_executable(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The `vllm` to serve with (find_vllm's path)."""
    return find_vllm(explicit, environ)[0]


def serve_flags(engine_args: Mapping[str, Any]) -> list[str]:
    """`vllm serve` flags for vLLM engine arguments (EngineArgs field names): True -> --name,
    False -> --no-name, anything else -> --name value (underscores as dashes, as vLLM's CLI spells them)."""
    flags: list[str] = []
    for key, value in engine_args.items():
        name = key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"--{name}" if value else f"--no-{name}")
        else:
            flags += [f"--{name}", str(value)]
    return flags


# Run by the `python` beside the located `vllm`: that env's vLLM decides its platform's engine arguments.
_PROBE = "import json; from toolcall_repro.backends.vllm import cpu_engine_args; print(json.dumps(cpu_engine_args()))"


def serve_args(executable: str) -> tuple[list[str], str]:
    """(flags, platform) that `vllm serve` from `executable`'s env needs beyond bfcl-eval's command: on a
    CPU build the engine arguments the vllm backend also uses (`backends.vllm.CPU_ENGINE_ARGS`: whole-prompt
    prefill, since every BFCL request is seeded, and an explicit KV cache), none on a GPU. Asked of the
    interpreter beside `executable` (the env's own vLLM); where that cannot import vLLM (no such env), no
    flags and the platform "unknown"."""
    python = Path(executable).parent / "python"
    probe = (
        subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True)
        if python.is_file()
        else None
    )
    if probe is None or probe.returncode != 0:
        why = probe.stderr.strip().splitlines()[-1:] if probe is not None else [f"no {python}"]
        print(
            f"vllm platform: unknown ({' '.join(why)}); serving with bfcl-eval's flags only", file=sys.stderr
        )
        return [], "unknown"
    args = json.loads(probe.stdout.strip().splitlines()[-1])
    return serve_flags(args), "cpu" if args else "gpu"


def locate_vllm(j) -> None:
    """The locate_vllm job (toolcall_repro.job): run inside the vLLM env (eval-vllm.yaml, as Snakemake deploys
    it under --sdm conda), record the `vllm` generate_bfcl serves with in output.vllm:
    {"vllm": path, "found_by": ..., "python": this env's interpreter, "platform": cpu | gpu | unknown,
    "serve_args": flags that platform needs after bfcl-eval's own}."""
    path, source = find_vllm()
    flags, platform = serve_args(path)
    print(
        f"vllm for BFCL: {path} (found by {source}; platform {platform}, serve args {flags})", file=sys.stderr
    )
    record = {
        "vllm": path,
        "found_by": source,
        "python": sys.executable,
        "platform": platform,
        "serve_args": flags,
    }
    atomic_write_json(j.out("vllm"), record)


def recorded_vllm(record: str | Path) -> str:
    """The `vllm` that locate_vllm recorded in `record`, checked to be an executable here (a compute node
    sees the submit host's envs only on a shared filesystem)."""
    path = json.loads(Path(record).read_text())["vllm"]
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise VLLMNotFound(
            f"{record}: locate_vllm recorded {path}, which is not an executable `vllm` on this node; the "
            "conda prefix (or VLLM_BIN) must be on a filesystem every node sees (docs/cluster.md)"
        )
    return path


def recorded_serve_args(record: str | Path) -> list[str]:
    """The `vllm serve` flags locate_vllm recorded for its platform (none in a record written before it
    recorded them)."""
    return list(json.loads(Path(record).read_text()).get("serve_args", []))
