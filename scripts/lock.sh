#!/usr/bin/env bash
# Regenerate every lock (requirements/<env>.lock) from its requirements/<env>.in: exact versions and sha256
# hashes of every package, so that installs (scripts/install.sh, scripts/install-verl-env.sh, the conda env
# files) leave no resolver decision to install time. Needs uv (pip install uv, outside the project venvs;
# .venv/bin/uv is used when present) and the registry; deterministic: releases after
# scripts/locks.py:EXCLUDE_NEWER are ignored. Also rewrites each conda env file's lock sha256 line.
#   bash scripts/lock.sh                  all locks
#   bash scripts/lock.sh main verl-cpu    some
#   python3 scripts/locks.py check        which are stale (no network; tests/test_locks.py does the same)
# torch==2.13.0+cpu is found in /opt/wheels when it exists, else on the PyTorch CPU index
# (TORCH_FIND_LINKS=<dir or page of wheels> to choose).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" scripts/locks.py compile "$@"
