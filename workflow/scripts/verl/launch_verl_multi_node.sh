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
# Ray's token authentication is set for the whole job: Ray 2.60's `ray start --head` turns it on by itself
# when ~/.ray/auth_token exists (any earlier local ray.init, a single-node verl job among them, writes that
# file), while `ray start --address` and ray.init(address=...) on the other side do not, so the worker
# and wait-ray failed with "Authentication token is missing or incorrect" (found on scripts/local_slurm.sh).
# So: RAY_AUTH_MODE=token with a fresh token per job in RAY_AUTH_TOKEN, which every srun step and the
# driver inherit; a RAY_AUTH_MODE, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH of your own is kept.
# Knobs (none needed on a cluster): VERL_RAY_PORT (6379), VERL_RAY_CPUS_PER_NODE (nproc), VERL_RAY_WAIT_S
# (600); VERL_RAY_START_ARGS, more options for every `ray start` (e.g. --object-store-memory=...), and
# VERL_RAY_HEAD_ARGS for the head's alone (head-only flags: --temp-dir=..., which the workers take from the
# head, --include-dashboard=false); VERL_RAY_CHECK=1 brings the cluster up and runs a probe (a task pinned
# to each node, which prints the SLURM node it ran on) instead of verl's driver, then stops Ray: the
# bring-up alone, in about a minute; VERL_RAY_STOP_ALL=0 ends Ray by ending this job's own head and
# worker steps (srun then has SLURM end every process of the step) instead of `ray stop --force` on each
# node, which stops every Ray of this user there: for a host shared with other Ray users
# (tests/cluster/test_ray_two_nodes.py, where both slurmd nodes are one host).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:?usage: launch_verl_multi_node.sh OUT_DIR NODES GPUS_PER_NODE}
NODES=${2:?nodes}
GPUS=${3:?gpus per node}
PY=${VERL_PYTHON:-python}
RAY_PORT=${VERL_RAY_PORT:-6379}
CPUS=${VERL_RAY_CPUS_PER_NODE:-$(nproc)}
WAIT_S=${VERL_RAY_WAIT_S:-600}
read -r -a START_ARGS <<< "${VERL_RAY_START_ARGS:-}"
read -r -a HEAD_ARGS <<< "${VERL_RAY_HEAD_ARGS:-}"
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
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}
if [ "$RAY_AUTH_MODE" = token ] && [ -z "${RAY_AUTH_TOKEN:-}" ] && [ -z "${RAY_AUTH_TOKEN_PATH:-}" ]; then
  RAY_AUTH_TOKEN=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  export RAY_AUTH_TOKEN
fi
STEP=(srun --overlap --nodes=1 --ntasks=1 --cpus-per-task="$CPUS" --gpus-per-node="$GPUS")
# Each GPU step gets ROCR_VISIBLE_DEVICES from SLURM beside CUDA_VISIBLE_DEVICES (a gres.conf that names no
# vendor), and verl's Worker refuses both (launch_verl.sh): the raylets, and so every actor, start without it.
NO_ROCR=(env -u ROCR_VISIBLE_DEVICES)
HEAD_IP=$("${STEP[@]}" -w "$HEAD" bash "$HERE/head_address.sh" "${HOSTS[1]}")
ADDRESS="$HEAD_IP:$RAY_PORT"
echo "[multi_node] head $HEAD ($ADDRESS), workers ${HOSTS[*]:1:$((NODES - 1))}"

PIDS=()
# A step that names no GPUs takes the job's GPU request as its own (a100:16 on one node: "Unable to create
# step for job N: Invalid generic resource (gres) specification", with or without SLURM_GPUS): the stop
# steps ask for none.
cleanup() {
  if [ "${VERL_RAY_STOP_ALL:-1}" = 1 ]; then
    for host in "${HOSTS[@]:0:$NODES}"; do
      srun --overlap --nodes=1 --ntasks=1 --gres=none -w "$host" "$PY" -m ray.scripts.scripts stop --force >/dev/null 2>&1 || true
    done
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ "${VERL_RAY_STOP_ALL:-1}" != 1 ]; then  # srun ends its step on TERM; wait for the steps (60 s)
    local left _
    for _ in $(seq 120); do
      left=0
      for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
      [ "$left" = 0 ] && break
      sleep 0.5
    done
  fi
}
trap cleanup EXIT

"${STEP[@]}" -w "$HEAD" "${NO_ROCR[@]}" "$PY" -m ray.scripts.scripts start --head --node-ip-address="$HEAD_IP" \
  --port="$RAY_PORT" --num-cpus="$CPUS" --num-gpus="$GPUS" --block "${START_ARGS[@]}" "${HEAD_ARGS[@]}" &
PIDS+=($!)
"$PY" -m toolcall_repro.engines.verl wait-ray --address "$ADDRESS" --nodes 1 --gpus 0 --timeout-s "$WAIT_S"
for host in "${HOSTS[@]:1:$((NODES - 1))}"; do
  "${STEP[@]}" -w "$host" "${NO_ROCR[@]}" "$PY" -m ray.scripts.scripts start --address="$ADDRESS" \
    --num-cpus="$CPUS" --num-gpus="$GPUS" --block "${START_ARGS[@]}" &
  PIDS+=($!)
done
"$PY" -m toolcall_repro.engines.verl wait-ray --address "$ADDRESS" --nodes "$NODES" \
  --gpus "$((NODES * GPUS))" --timeout-s "$WAIT_S"

export RAY_ADDRESS="$ADDRESS"
if [ "${VERL_RAY_CHECK:-0}" = 1 ]; then
  # the bring-up alone: every node answers a task pinned to it (its SLURM node name comes from the step's
  # environment, which that node's raylet and workers inherit)
  "$PY" - "$NODES" <<'EOF'
import sys

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(logging_level="ERROR")  # RAY_ADDRESS
alive = [n for n in ray.nodes() if n["Alive"]]


@ray.remote(num_cpus=0)
def where():
    import os

    return os.environ.get("SLURMD_NODENAME", "?"), os.getpid(), os.environ.get("ROCR_VISIBLE_DEVICES", "unset")


pins = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in alive]
seen = ray.get([where.options(scheduling_strategy=p).remote() for p in pins], timeout=120)
gpus = ray.cluster_resources().get("GPU", 0)
on = [f"{node} (node {n['NodeID'][:8]} at {n['NodeManagerAddress']}, pid {pid}, ROCR_VISIBLE_DEVICES {rocr})"
      for (node, pid, rocr), n in zip(seen, alive)]
print(f"[multi_node] ray check: {len(alive)} alive node(s), {gpus:g} GPU(s); a task ran on each: {', '.join(on)}")
ray.shutdown()
sys.exit(0 if len(alive) == int(sys.argv[1]) else 1)
EOF
  exit $?
fi
"$PY" -m toolcall_repro.engines.verl train --out "$OUT"
