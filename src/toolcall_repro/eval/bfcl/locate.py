"""Which `vllm` BFCL serves with: the vLLM environment's, since bfcl-eval's cannot hold vLLM (vLLM 0.24.0
needs numpy>=2, bfcl-eval pins 1.26.4).

At paper scale the workflow's `locate_vllm` job runs inside the vLLM env (eval-vllm.yaml, as Snakemake
deploys it under --sdm conda) and records that env's `vllm`; every `score_bfcl` job, in the BFCL env,
serves with the recorded one. This module imports neither bfcl-eval nor vLLM: it runs in both envs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

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


def locate_vllm(j) -> None:
    """The locate_vllm job (toolcall_repro.job): run inside the vLLM env (eval-vllm.yaml, as Snakemake deploys
    it under --sdm conda), record the `vllm` score_bfcl serves with in output.vllm:
    {"vllm": path, "found_by": ..., "python": this env's interpreter}."""
    path, source = find_vllm()
    print(f"vllm for BFCL: {path} (found by {source})", file=sys.stderr)
    atomic_write_json(j.out("vllm"), {"vllm": path, "found_by": source, "python": sys.executable})


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
