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
# Headless Chromium renders the HTML report in the report check (scripts/check_report_html.py).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "install.sh: chromium not installed; the report check will skip" >&2
fi
.venv/bin/python -c "import torch, bfcl_eval, snakemake; print('torch', torch.__version__, '| .venv ready')"
