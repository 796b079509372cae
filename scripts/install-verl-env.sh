#!/usr/bin/env bash
# Create .venv-verl: verl 0.9.1 (numpy>=2, so apart from .venv and its bfcl-eval pin) + this package.
#   bash scripts/install-verl-env.sh         CPU: the verl CPU tests (CI, laptops)
#   bash scripts/install-verl-env.sh --gpu   a GPU node: verl's vLLM stack (paper-scale training, `vllm serve`)
#   FLASH_ATTN=1 bash scripts/install-verl-env.sh --gpu   also compile flash-attn (CUDA toolkit, tens of minutes)
# The --gpu pins are workflow/envs/train-verl.yaml's (checked by tests/workflow/test_envs_resolve.py).
# torch goes in first, pinned: anything that asks for an unpinned torch would pull a multi-GB CUDA build.
# Idempotent: reruns only top up what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VERL_VENV:-.venv-verl}
MODE=${1:-cpu}
GPU_TORCH=torch==2.11.0
GPU_VERL="verl[vllm]==0.9.1"
GPU_LMEVAL="lm-eval[vllm]==0.4.13" # lm-eval on vLLM, as workflow/envs/eval-vllm.yaml (scripts/gpu_smoke.sh)
FLASH_ATTN_PIN=flash-attn==2.8.3
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q)
"${PIP[@]}" --upgrade pip
case "$MODE" in
  cpu)
    "${PIP[@]}" torch==2.13.0
    "${PIP[@]}" "verl[verl-core]==0.9.1" "pytest>=8" "hypothesis>=6.100"
    ;;
  --gpu)
    # verl 0.9.1's own `vllm` extra pins vllm==0.24.0, torch==2.11.0 and transformers==5.9.0.
    "${PIP[@]}" "$GPU_TORCH"
    "${PIP[@]}" "$GPU_TORCH" "$GPU_VERL" "$GPU_LMEVAL" "pytest>=8"
    # Optional: flash-attn compiles against the torch above (hence no build isolation). Without it the
    # composed verl config uses SDPA, as in the conda env (workflow/envs/train-verl.yaml).
    if [ "${FLASH_ATTN:-0}" = 1 ]; then
      "${PIP[@]}" --no-build-isolation "$FLASH_ATTN_PIN"
    fi
    ;;
  *)
    echo "usage: $0 [--gpu]" >&2
    exit 2
    ;;
esac
# This package without its dependencies: they are verl's (plus the few below); never bfcl-eval here.
"${PIP[@]}" pyyaml jsonschema
"${PIP[@]}" --no-deps -e .
"$VENV/bin/python" -c "import numpy, torch, verl, toolcall_repro; print('verl', verl.__version__, '| torch', torch.__version__, '| numpy', numpy.__version__, '| $VENV ready')"
