#!/usr/bin/env bash
# The whole test suite: lint, the main environment's tests (workflow tests included), then the verl
# environment's CPU tests. Exits non-zero on the first failing part.
# Workflow tests run in working directories of their own: a completed `make run` in this work tree
# changes no result, and no test writes into results/ or .snakemake/ here. A test that lacks a fixture
# from outside the repository (ACEBench data, Chromium) skips, saying why in one line;
# TOOLCALL_REQUIRE_FIXTURES=1 (set by .ci/run) makes every skip a failure. In .venv, where verl is
# absent, tests/engines/verl is not collected (tests/conftest.py); the last line runs it in .venv-verl.
# `scripts/test.sh fast` (make test-fast): the main environment's unit tests alone: no lint, and none of the
# tests marked workflow (Snakemake CLI, scripts, fresh venvs; e2e and paper_cpu among them), slow or verl
# (markers: pyproject.toml, tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export BFCL_PROJECT_ROOT=${BFCL_PROJECT_ROOT:-$PWD/.bfcl}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [[ ${1:-} == fast ]]; then
  exec .venv/bin/python -m pytest -q -m "not workflow and not slow and not verl" --durations=10 tests
fi
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/python -m pytest -q -m "not verl" --durations=15 tests
.venv-verl/bin/python -m pytest -q -m verl tests/engines/verl -p no:cacheprovider
