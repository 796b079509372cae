#!/usr/bin/env bash
# One verl training job (the train_grpo rule at paper scale): prepare -> train -> finalize.
#   launch_verl.sh --train T.parquet --heldout H.parquet --base MODEL_DIR --config RUN_JSON --out DIR
#                  --seed S --nodes N --gpus-per-node G [--verl-config VERL_JSON]   (--verl: same)
# One node: verl starts Ray itself (launch_verl_single_node.sh). Several nodes: a Ray head and workers
# are started with srun inside the SLURM allocation first (launch_verl_multi_node.sh).
# VERL_PYTHON names the interpreter of the verl environment (default: `python` on PATH).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${VERL_PYTHON:-python}
JOB_START=$(date +%s)

PREPARE=()
OUT="" NODES=1 GPUS=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "launch_verl.sh: $1 needs a value" >&2; exit 2; }
  case "$1" in
    --out) OUT=$2 ;;
    --nodes) NODES=$2 ;;
    --gpus-per-node) GPUS=$2 ;;
    --train|--heldout|--base|--config|--seed|--verl-config) ;;
    --verl) set -- --verl-config "${@:2}" ;;
    *) echo "launch_verl.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  PREPARE+=("$1" "$2")
  shift 2
done
[ -n "$OUT" ] && [ -n "$GPUS" ] || { echo "launch_verl.sh: --out and --gpus-per-node are required" >&2; exit 2; }
mkdir -p "$OUT"

# SLURM's gres/gpu sets ROCR_VISIBLE_DEVICES beside CUDA_VISIBLE_DEVICES for every GPU job whose gres.conf
# names no vendor (no Flags=nvidia_gpu_env, no AutoDetect=nvml), and verl's Worker refuses to start with
# both ("Please don't set ROCR_VISIBLE_DEVICES when HIP/CUDA_VISIBLE_DEVICES is set", verl
# single_controller/base/worker.py): the first actor dies. The GPU envs are CUDA builds: CUDA's variable
# stays, AMD's goes, for this process and the Ray processes it starts (found on the local SLURM).
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ] && [ -n "${ROCR_VISIBLE_DEVICES:-}" ]; then
  echo "[launch_verl] unset ROCR_VISIBLE_DEVICES=$ROCR_VISIBLE_DEVICES (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)"
  unset ROCR_VISIBLE_DEVICES
fi

echo "[launch_verl] prepare: $(date -Is)"
# On a retry (Snakemake's `retries`, or a rerun) prepare finds the run's newest complete checkpoint
# under $OUT/checkpoints and points verl at it; another run's checkpoints are discarded.
"$PY" -m toolcall_repro.engines.verl prepare "${PREPARE[@]}" --job-start-s "$JOB_START"

echo "[launch_verl] train on $NODES node(s) x $GPUS GPU(s): $(date -Is)"
if [ "$NODES" -le 1 ]; then
  bash "$HERE/launch_verl_single_node.sh" "$OUT"
else
  bash "$HERE/launch_verl_multi_node.sh" "$OUT" "$NODES" "$GPUS"
fi

echo "[launch_verl] finalize: $(date -Is)"
# GPU-hours = the job's wall-clock so far (prepare + Ray + training) x its GPUs; finalize adds the merge.
"$PY" -m toolcall_repro.engines.verl finalize --out "$OUT" --job-start-s "$JOB_START"
