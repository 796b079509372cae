#!/usr/bin/env bash
# verl over NODES nodes of this SLURM allocation: a Ray head on the first node, a Ray worker on each
# other node (srun, one step each, --overlap so they share the allocation with this script), then the
# verl driver here, joined to that cluster through RAY_ADDRESS. Ray is stopped on exit.
#   launch_verl_multi_node.sh OUT_DIR NODES GPUS_PER_NODE
# Where it runs, SLURM_* differs. Under Snakemake (the slurm executor's jobstep, 0.6.1) the rule's
# command gets SLURM_JOB_ID and a few ids only: the jobstep removes every other SLURM_*, SRUN_* and
# SBATCH_* variable (SLURM_JOB_NODELIST and SLURM_CONF too) before it starts the command. From a plain
# `sbatch --nodes=2 --gpus=a100:16` script it gets the whole batch environment, SLURM_GPUS=a100:16 among
# it, which srun reads as its own --gpus default: every one-node step below would then ask for 16 GPUs
# on one node, and srun refuses it ("srun: error: Invalid GRES specification (with and without type
# identification)"; checked on SLURM 22.05 with scripts/local_slurm.sh), the Ray stop steps included.
# So the job-level GPU and TRES defaults are unset here, and every step names what it needs. The node
# list comes from scontrol when SLURM_JOB_NODELIST is gone. The head's address is the one the workers
# reach it at (head_address.sh: VERL_HEAD_IFACE, else the route to the first worker; never a loopback).
# Each srun step asks for GPUS_PER_NODE GPUs on its node: an allocation split unevenly over the nodes
# fails there, at the first step, instead of training on fewer GPUs.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:?usage: launch_verl_multi_node.sh OUT_DIR NODES GPUS_PER_NODE}
NODES=${2:?nodes}
GPUS=${3:?gpus per node}
PY=${VERL_PYTHON:-python}
RAY_PORT=${VERL_RAY_PORT:-6379}
CPUS=${VERL_RAY_CPUS_PER_NODE:-$(nproc)}
WAIT_S=${VERL_RAY_WAIT_S:-600}
: "${SLURM_JOB_ID:?multi-node verl runs inside a SLURM allocation (SLURM_JOB_ID is unset)}"
# srun's input variables for GPUs/TRES, set by sbatch from the allocation's request (SLURM 22.05: SLURM_GPUS;
# later releases add SLURM_TRES_PER_TASK); each step below passes its own --gpus-per-node instead.
unset SLURM_GPUS SLURM_GPUS_PER_NODE SLURM_GPUS_PER_TASK SLURM_GPUS_PER_SOCKET SLURM_CPUS_PER_GPU \
  SLURM_MEM_PER_GPU SLURM_NTASKS_PER_GPU SLURM_TRES_PER_TASK SLURM_TRES_PER_JOB SLURM_TRES_BIND

NODELIST=${SLURM_JOB_NODELIST:-$(scontrol show job "$SLURM_JOB_ID" | tr ' ' '\n' | sed -n 's/^NodeList=//p' | head -n 1)}
mapfile -t HOSTS < <(scontrol show hostnames "$NODELIST")
if [ "${#HOSTS[@]}" -lt "$NODES" ]; then
  echo "launch_verl_multi_node.sh: allocation has ${#HOSTS[@]} node(s) ($NODELIST), $NODES needed" >&2
  exit 1
fi
HEAD=${HOSTS[0]}
STEP=(srun --overlap --nodes=1 --ntasks=1 --cpus-per-task="$CPUS" --gpus-per-node="$GPUS")
HEAD_IP=$("${STEP[@]}" -w "$HEAD" bash "$HERE/head_address.sh" "${HOSTS[1]}")
ADDRESS="$HEAD_IP:$RAY_PORT"
echo "[multi_node] head $HEAD ($ADDRESS), workers ${HOSTS[*]:1:$((NODES - 1))}"

PIDS=()
# A step that names no GPUs takes the job's GPU request as its own (a100:16 on one node: "Unable to create
# step for job N: Invalid generic resource (gres) specification", with or without SLURM_GPUS): the stop
# steps ask for none.
cleanup() {
  for host in "${HOSTS[@]:0:$NODES}"; do
    srun --overlap --nodes=1 --ntasks=1 --gres=none -w "$host" "$PY" -m ray.scripts.scripts stop --force >/dev/null 2>&1 || true
  done
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

"${STEP[@]}" -w "$HEAD" "$PY" -m ray.scripts.scripts start --head --node-ip-address="$HEAD_IP" \
  --port="$RAY_PORT" --num-cpus="$CPUS" --num-gpus="$GPUS" --block &
PIDS+=($!)
"$PY" -m toolcall_repro.engines.verl wait-ray --address "$ADDRESS" --nodes 1 --gpus 0 --timeout-s "$WAIT_S"
for host in "${HOSTS[@]:1:$((NODES - 1))}"; do
  "${STEP[@]}" -w "$host" "$PY" -m ray.scripts.scripts start --address="$ADDRESS" \
    --num-cpus="$CPUS" --num-gpus="$GPUS" --block &
  PIDS+=($!)
done
"$PY" -m toolcall_repro.engines.verl wait-ray --address "$ADDRESS" --nodes "$NODES" \
  --gpus "$((NODES * GPUS))" --timeout-s "$WAIT_S"

export RAY_ADDRESS="$ADDRESS"
"$PY" -m toolcall_repro.engines.verl train --out "$OUT"
