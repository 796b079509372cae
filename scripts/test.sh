#!/usr/bin/env bash
# The whole test suite: lint, the main environment's tests (workflow tests included; tests/cluster in a
# second process beside the rest), then the verl environment's CPU tests. Exits non-zero on the first
# failing part.
# Workflow tests run in working directories of their own: a completed `make run` in this work tree
# changes no result, and no test writes into results/ or .snakemake/ here. A test that lacks a fixture
# from outside the repository (ACEBench data, Chromium) skips, saying why in one line;
# TOOLCALL_REQUIRE_FIXTURES=1 (set by .ci/run) makes every skip a failure. In .venv, where verl is
# absent, tests/engines/verl is not collected (tests/conftest.py); the last line runs it in .venv-verl.
# `scripts/test.sh fast` (make test-fast): the main environment's unit tests alone: no lint, and none of the
# tests marked workflow (Snakemake CLI, scripts, fresh venvs; e2e and paper_cpu among them), slow or verl
# (markers: pyproject.toml, tests/conftest.py), on every core: pytest-xdist, TEST_WORKERS processes (default
# `auto`, one per CPU), each test handed to whichever worker is free (--dist worksteal: a few 5-7 s tests
# otherwise leave one worker idle at the end). Each worker collects the suite itself (~20 s here).
set -euo pipefail
cd "$(dirname "$0")/.."
export BFCL_PROJECT_ROOT=${BFCL_PROJECT_ROOT:-$PWD/.bfcl}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [[ ${1:-} == fast ]]; then
  exec .venv/bin/python -m pytest -q -n "${TEST_WORKERS:-auto}" --dist worksteal \
    -m "not workflow and not slow and not verl" --durations=10 tests
fi
.venv/bin/ruff check src tests benchmarks scripts
# tests/cluster (a local SLURM; on it the toy paper run, ~40 min, most of it jobs that keep one core busy)
# runs in a pytest process of its own beside the rest of the main suite (~20 min, mostly one core): on 2
# cores the two take about as long as the cluster part alone, not the sum. Its own process because its
# local SLURM is one per machine (scripts/local_slurm.sh); its output follows the main suite's. An
# interrupt reaches it as SIGINT, so its fixtures stop the daemons.
cluster_log=$(mktemp "${TMPDIR:-/tmp}/toolcall-test-cluster.XXXXXX")
.venv/bin/python -m pytest -q -m "not verl" --durations=10 -p no:cacheprovider tests/cluster \
  > "$cluster_log" 2>&1 &
cluster=$!
trap 'kill -INT "$cluster" 2>/dev/null; wait "$cluster"; rm -f "$cluster_log"; exit 130' INT TERM
main_rc=0
.venv/bin/python -m pytest -q -m "not verl" --durations=15 --ignore=tests/cluster tests || main_rc=$?
cluster_rc=0
wait "$cluster" || cluster_rc=$?
trap - INT TERM
echo "--- tests/cluster (beside the main suite), rc $cluster_rc ---"
cat "$cluster_log"
rm -f "$cluster_log"
[ "$main_rc" = 0 ] && [ "$cluster_rc" = 0 ] || exit 1
.venv-verl/bin/python -m pytest -q -m verl tests/engines/verl -p no:cacheprovider
