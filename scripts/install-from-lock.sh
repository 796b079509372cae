#!/usr/bin/env bash
# Install one environment from its lock, and nothing else. Why: requirements/<env>.lock (scripts/lock.sh)
# holds the exact version and sha256 hashes of every package, so pip, with --require-hashes --no-deps,
# makes no resolver decision. The lock's setuptools goes in first: the few packages PyPI has only as sdists
# (sqlitedict, word2number, rouge-score, antlr4-python3-runtime, ...) are then built with it, without build
# isolation, so no build requirement is fetched unpinned either. Then this package itself, --no-deps
# --no-build-isolation; last a marker $PREFIX/toolcall-repro-lock.json naming the lock and its sha256,
# which the manifests read from sys.prefix.
#   scripts/install-from-lock.sh PYTHON ENV                  lock, package, marker (install.sh, install-verl-env.sh)
#   scripts/install-from-lock.sh --package-only PYTHON ENV   package, marker (workflow/envs/*.post-deploy.sh:
#                                                            the conda env's pip section installed the lock)
# torch==2.13.0+cpu (main, verl-cpu) is not on PyPI: scripts/install-torch.sh installs that entry alone first,
# from where pip finds it (here /opt/wheels, pip config find-links) or else from PyTorch's CPU index
# (TORCH_INDEX_URL, default https://download.pytorch.org/whl/cpu), hash-checked; the rest without that index:
# pip would otherwise ask it about every package (where it is unreachable, 5 retries and ~8 s each: half an
# hour for a lock).
# Idempotent: a rerun installs what is missing or differs from the lock and keeps the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGE_ONLY=0
if [ "${1:-}" = --package-only ]; then
  PACKAGE_ONLY=1
  shift
fi
if [ $# != 2 ]; then
  echo "usage: $0 [--package-only] PYTHON ENV" >&2
  exit 2
fi
PY=$1
ENV=$2
LOCK=requirements/$ENV.lock
if [ ! -f "$LOCK" ]; then
  echo "$0: no $LOCK (scripts/lock.sh makes it from requirements/$ENV.in)" >&2
  exit 2
fi
if [ "$PACKAGE_ONLY" = 0 ]; then
  # entries REGEX: the lock's entries whose line matches REGEX, with their hashes
  entries() { awk -v re="$1" '/^[^ #]/ { keep = ($0 ~ re) } keep' "$LOCK"; }
  FIRST=$(mktemp)
  SECOND=$(mktemp)
  trap 'rm -f "$FIRST" "$SECOND"' EXIT
  entries '^setuptools==' >"$FIRST"
  "$PY" -m pip install -q --require-hashes --no-deps -r "$FIRST"
  bash scripts/install-torch.sh "$PY" "$LOCK"
  # Two passes. Entries with several files (wheels) first, binaries only; then the one-file entries (the
  # sdist-only packages, and a few one-wheel ones such as torch+cpu), built without isolation once every
  # package is in: setuptools' egg_info imports installed packages' entry points (e.g. kernels ->
  # huggingface_hub -> filelock), which fails when a build runs in a half-installed venv.
  # split N: the lock's entries with N hashes (N = 1) or more (N = 2), each with its hash lines.
  split() {
    awk -v want="$1" '
      function flush() { if (block != "" && ((want == 1) == (hashes == 1))) printf "%s", block }
      /^[^ #]/ { flush(); block = ""; hashes = 0; keep = 1 }
      /^#/ { keep = 0 }
      keep { block = block $0 "\n"; if ($0 ~ /--hash=/) hashes++ }
      END { flush() }' "$LOCK"
  }
  split 2 >"$FIRST"
  split 1 >"$SECOND"
  "$PY" -m pip install -q --require-hashes --no-deps --only-binary :all: -r "$FIRST"
  "$PY" -m pip install -q --require-hashes --no-deps --no-build-isolation -r "$SECOND"
fi
"$PY" -m pip install -q --no-deps --no-build-isolation -e .
"$PY" - "$ENV" "$LOCK" <<'PYEOF'
import hashlib
import json
import sys
from pathlib import Path

env, lock = sys.argv[1:]
marker = {"env": env, "lock": lock, "sha256": hashlib.sha256(Path(lock).read_bytes()).hexdigest()}
(Path(sys.prefix) / "toolcall-repro-lock.json").write_text(json.dumps(marker) + "\n")
PYEOF
