#!/usr/bin/env bash
# Create .venv with everything the embedded default and the main test suite need, on a bare machine.
# torch==2.13.0 (CPU wheel) goes in first: any unpinned torch pulled by a dependency is a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[eval,workflow,test]"
.venv/bin/python -c "import torch, bfcl_eval, snakemake; print('torch', torch.__version__, '| .venv ready')"
