#!/usr/bin/env bash
# Create .venv with everything the embedded default and the main test suite need, on a bare machine, from
# requirements/main.lock alone (exact versions and sha256 hashes of every package, made by scripts/lock.sh):
# no resolver decision is left to install time, and torch is the CPU build the lock pins (2.13.0+cpu), never
# a CUDA build a dependency would pull. Here pip finds that wheel in /opt/wheels; elsewhere the install takes
# it from PyTorch's CPU index by itself (scripts/install-torch.sh; TORCH_INDEX_URL=<a mirror> to use another).
# Idempotent: a rerun installs what is missing or differs from the lock (scripts/install-from-lock.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
bash scripts/install-from-lock.sh .venv/bin/python main
# Headless Chromium renders the HTML report in the report check (scripts/check_report_html.py).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "install.sh: chromium not installed; the report check will skip" >&2
fi
.venv/bin/python -c "import torch, bfcl_eval, snakemake; print('torch', torch.__version__, '| .venv ready')"
