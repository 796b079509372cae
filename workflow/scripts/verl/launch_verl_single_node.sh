#!/usr/bin/env bash
# verl on the GPUs of this node: verl's run_ppo starts a local Ray (num_cpus from the config, or
# this job's CPU affinity when unset, never the whole machine's count).
#   launch_verl_single_node.sh OUT_DIR
set -euo pipefail
OUT=${1:?usage: launch_verl_single_node.sh OUT_DIR}
PY=${VERL_PYTHON:-python}
unset RAY_ADDRESS
exec "$PY" -m toolcall_repro.engines.verl train --out "$OUT"
