#!/usr/bin/env bash
# First contact on one GPU (under 15 minutes): the paper path end to end, small. See docs/cluster.md.
#   bash scripts/gpu_smoke.sh [--model HUB_ID_OR_DIR] [--out DIR] [--gpus N] [--cuda 13|12] [--dry-run]
# 1. a few GRPO steps of the project's verl trainer (filter + down-sampling, verl's default dataloader
#    workers) on a 0.5B model: expects the filter's epoch == verl's epoch at every step, update rows = m
#    per group, and a final checkpoint that transformers loads;
# 2. BFCL on 5 entries of the trained model through `vllm serve` (from the verl env): zero inference errors;
# 3. lm-eval (vLLM backend) on 50 HellaSwag documents.
# Interpreters (defaults: this checkout's venvs from scripts/install.sh and install-verl-env.sh --gpu):
#   VERL_PYTHON  verl + vLLM env: training, `vllm serve`, lm-eval     (.venv-verl/bin/python)
#   MAIN_PYTHON  bfcl-eval env: data preparation and BFCL scoring     (.venv/bin/python)
# The model and HellaSwag are read from the Hub (or HF_HOME's cache) on this machine.
# --cuda: the CUDA major of the GPU env, as the config's engines.cuda: 13 (default: requirements/train-verl.lock,
# nvidia-cuda-runtime 13.0, an NVIDIA driver >= 580) or 12 (train-verl-cu12.lock, CUDA 12.8, driver >= 525;
# .venv-verl from install-verl-env.sh --gpu --cuda 12). Step 0 checks the node's driver against that lock
# first (python -m toolcall_repro.gpu_driver) and stops with one line saying what to do where it is older.
# --dry-run prints every command instead of running it.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
MODEL=Qwen/Qwen2.5-0.5B-Instruct
OUT=results/gpu_smoke
GPUS=1
CUDA=13
DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=${2:?--model needs a value}; shift 2 ;;
    --out) OUT=${2:?--out needs a value}; shift 2 ;;
    --gpus) GPUS=${2:?--gpus needs a value}; shift 2 ;;
    --cuda) CUDA=${2:?--cuda needs a value}; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "gpu_smoke.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# The lock of each CUDA major and the oldest driver it runs on (toolcall_repro.gpu_driver: MIN_DRIVER, the
# lock's nvidia-cuda-runtime; tests/cluster/test_gpu_driver.py holds them equal)
case "$CUDA" in
  13) GPU_LOCK=train-verl MIN_DRIVER=580 ;;
  12) GPU_LOCK=train-verl-cu12 MIN_DRIVER=525 ;;
  *) echo "gpu_smoke.sh: --cuda must be 12 or 13 (engines.cuda), got $CUDA" >&2; exit 2 ;;
esac
VERL_PYTHON=${VERL_PYTHON:-$REPO/.venv-verl/bin/python}
MAIN_PYTHON=${MAIN_PYTHON:-$REPO/.venv/bin/python}
VLLM_BIN=${VLLM_BIN:-$(dirname "$VERL_PYTHON")/vllm}
export VERL_PYTHON VLLM_BIN
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
if [ "$DRY" = 0 ]; then
  for exe in "$VERL_PYTHON" "$MAIN_PYTHON" "$VLLM_BIN"; do
    [ -x "$exe" ] || { echo "gpu_smoke.sh: $exe not found (scripts/install.sh, install-verl-env.sh --gpu --cuda $CUDA)" >&2; exit 2; }
  done
fi

# The training run: n = 4 rollouts, down-sampled to m = 2, filter k = 1 re-probed every epoch; two
# epochs of two steps (8 prompts a step). Nothing overrides verl's dataloader workers (default 8).
N=4 M=2 BATCH=8 EPOCHS=2
RUN_CONFIG=$(tr -d "\n" <<EOF
{"setting": "single_turn", "variant": "efficient", "lr": 1e-6, "batch_size": $BATCH, "n": $N,
 "temperature": 1.0, "top_p": 1.0, "max_prompt_tokens": 2048, "max_new_tokens": 256, "epochs": $EPOCHS,
 "clip_low": 0.2, "clip_high": 0.28, "loss_agg": "token-mean", "checkpoint_every": 2, "heldout_size": 4,
 "filter": {"k": 1, "probe_every": 1, "probe_fraction": 0.0, "semantics": "temporary"},
 "downsample": {"m": $M, "selection": "max_variance", "advantage_scope": "group"}}
EOF
)
VERL_CONFIG=$(tr -d "\n" <<EOF
{"nodes": 1, "gpus_per_node": $GPUS, "tensor_parallel": 1, "gpu_memory_utilization": 0.4,
 "max_token_len_per_gpu": 8192, "max_checkpoints_to_keep": 1, "vllm": {"max_num_seqs": 64}}
EOF
)
PROTOCOL='{"id": "stronger", "system_prompt": "stronger", "template": "native", "thinking": "drop", "temperature": 0.7, "top_p": 0.8, "max_tokens": 512, "seed": 0, "backend": "vllm"}'
# Every step is a pipeline stage run by hand through the function its rule runs (`toolcall-repro stage`).
STAGE=(-m toolcall_repro.cli stage)
DATA=$OUT/data
TRAIN=$OUT/train

run() {  # print the command; run it unless --dry-run
  printf '+'
  printf ' %q' "$@"
  printf '\n'
  [ "$DRY" = 1 ] || "$@"
}

check() {  # a named check in Python (skipped, but printed, with --dry-run)
  local py=$1 name=$2 code=$3
  echo "+ check: $name"
  [ "$DRY" = 1 ] || "$py" -c "$code" || { echo "gpu_smoke.sh: FAILED: $name" >&2; exit 1; }
}

START=$(date +%s)
echo "== 0. the NVIDIA driver (the GPU env is CUDA $CUDA: driver >= $MIN_DRIVER, requirements/$GPU_LOCK.lock), data and model"
# before anything downloads or starts: an old driver fails here in one line, not minutes into verl
run "$MAIN_PYTHON" -m toolcall_repro.gpu_driver --lock "$REPO/requirements/$GPU_LOCK.lock"
# and the verl env is that lock's (a CUDA 13 venv on a 525-579 driver would fail only at the first CUDA call)
check "$VERL_PYTHON" "$VERL_PYTHON was installed from requirements/$GPU_LOCK.lock" "
import json, pathlib, sys
marker = pathlib.Path(sys.prefix) / 'toolcall-repro-lock.json'
env = json.loads(marker.read_text())['env'] if marker.exists() else 'no lock (no ' + marker.name + ')'
assert env == '$GPU_LOCK', sys.prefix + ' holds ' + env + ': bash scripts/install-verl-env.sh --gpu --cuda $CUDA'
"
echo "   24 synthetic xLAM-schema rows (train/held-out), $MODEL"
run mkdir -p "$DATA" "$OUT/logs"
if [ -d "$MODEL" ]; then
  BASE=$MODEL
else
  BASE=$OUT/models/base
  [ -d "$BASE" ] || run "$MAIN_PYTHON" "${STAGE[@]}" download_model --config "{\"hub_id\": \"$MODEL\"}" \
    --out "model=$BASE"
fi
run "$MAIN_PYTHON" "${STAGE[@]}" synthesize_source --option source=xlam --config '{"rows": 24, "malformed": 0}' \
  --seed data=0 --out "raw=$DATA/xlam.jsonl"
run "$MAIN_PYTHON" "${STAGE[@]}" normalise_source --config '{"source": "xlam"}' --in "raw=$DATA/xlam.jsonl" \
  --out "samples=$DATA/xlam.parquet" --out "rejects=$DATA/xlam.rejects.jsonl" --out "report=$DATA/xlam.report.json"
run "$MAIN_PYTHON" "${STAGE[@]}" pool_tooln1 --in "samples=$DATA/xlam.parquet" \
  --config '{"heldout_fraction": 0.2, "reserve_fraction": 0.0}' --seed filter=0 \
  --out "train=$DATA/train.parquet" --out "heldout=$DATA/heldout.parquet" --out "report=$DATA/pool.json"

echo "== 1. GRPO with the project's verl trainer ($GPUS GPU)"
run bash workflow/scripts/verl/launch_verl.sh --train "$DATA/train.parquet" --heldout "$DATA/heldout.parquet" \
  --base "$BASE" --config "$RUN_CONFIG" --verl-config "$VERL_CONFIG" --out "$TRAIN" --seed 0 \
  --nodes 1 --gpus-per-node "$GPUS"
check "$VERL_PYTHON" "filter epoch == verl epoch at every step; update rows = m per group" "
import json
lines = [json.loads(x) for x in open('$TRAIN/verl/log.jsonl')]
steps = [l['data'] for l in lines if 'training/global_step' in l['data']]
assert steps, 'verl logged no training step'
for d in steps:
    assert d['filter/epoch'] == d['training/epoch'], ('filter epoch', d['filter/epoch'], 'verl epoch', d['training/epoch'])
    assert d['perf/update_rows'] * $N == d['perf/gen_rows'] * $M, (d['perf/update_rows'], d['perf/gen_rows'])
epochs = sorted({d['training/epoch'] for d in steps})
print(len(steps), 'steps over verl epochs', epochs)
metrics = [json.loads(x) for x in open('$TRAIN/metrics.jsonl')]
assert len(metrics) == len(steps), (len(metrics), len(steps))
"
check "$VERL_PYTHON" "the final checkpoint loads (transformers)" "
from transformers import AutoModelForCausalLM, AutoTokenizer
tok = AutoTokenizer.from_pretrained('$TRAIN/final')
model = AutoModelForCausalLM.from_pretrained('$TRAIN/final')
print('final/:', type(model).__name__, sum(p.numel() for p in model.parameters()), 'parameters')
"

# --- 1b. kill and resume ------------------------------------------------------------------------------
# The same run in a second folder, checkpointed every step and killed (kill -9, the whole process group)
# once step 2 is checkpointed AND logged (a kill while verl scores a checkpoint step would lose its
# metrics line), then launched again: it must resume from global_step_2 and list every step once.
echo "== 1b. kill and resume"
RESUME=$(realpath -m "$OUT/train_resume")
RESUME_CONFIG=${RUN_CONFIG/\"checkpoint_every\": 2/\"checkpoint_every\": 1}
RESUME_ARGS=(--train "$DATA/train.parquet" --heldout "$DATA/heldout.parquet" --base "$BASE"
  --config "$RESUME_CONFIG" --verl-config "$VERL_CONFIG" --out "$RESUME" --seed 0 --nodes 1 --gpus-per-node "$GPUS")
echo "  (attempt 1: the command below, started with setsid in the background, killed at step 2)"
if [ "$DRY" = 0 ]; then
  mkdir -p "$RESUME"
  setsid bash workflow/scripts/verl/launch_verl.sh "${RESUME_ARGS[@]}" >"$RESUME.attempt1.log" 2>&1 &
  PID=$!
  until [ "$(cat "$RESUME/checkpoints/latest_checkpointed_iteration.txt" 2>/dev/null)" = 2 ] \
    && grep -q '"step": *2,' "$RESUME/verl/log.jsonl" 2>/dev/null; do
    kill -0 "$PID" 2>/dev/null || { echo "gpu_smoke.sh: FAILED: attempt 1 ended before its step-2 checkpoint" >&2; exit 1; }
    sleep 5
  done
  kill -9 -- "-$PID" || true
  wait "$PID" || true
  "$VERL_PYTHON" -m ray.scripts.scripts stop --force >/dev/null 2>&1 || true
fi
run bash workflow/scripts/verl/launch_verl.sh "${RESUME_ARGS[@]}"
check "$VERL_PYTHON" "the second attempt resumed from global_step_2; every step once in metrics.jsonl" "
import json, pathlib
out = pathlib.Path('$RESUME')
rows = lambda f: [json.loads(x) for x in (out / f).read_text().splitlines()]
assert 'trainer.resume_mode=resume_path' in (out / 'verl' / 'overrides.txt').read_text().splitlines()
steps = [m['step'] for m in rows('metrics.jsonl')]
curve = [c['step'] for c in rows('curve.jsonl')]
summary = json.loads((out / 'summary.json').read_text())
assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 3, steps
assert len(curve) == len(set(curve)) and curve[0] == 0, curve
assert summary['resumed_from_steps'] == [2] and summary['missing_steps'] == [], summary
print('kill-and-resume OK: steps', steps, 'curve', curve)
"
# ------------------------------------------------------------------------------------------------------

echo "== 2. BFCL, 5 entries, through vllm serve ($VLLM_BIN): locate_vllm, generate_bfcl, score_bfcl"
BFCL_CONFIG="{\"bfcl\": {\"categories\": [\"simple_python\"], \"limit\": 5}, \"protocol\": $PROTOCOL, \"model\": {\"tag\": \"smoke\"}}"
run mkdir -p "$OUT/bfcl/raw"
run "$VERL_PYTHON" "${STAGE[@]}" locate_vllm --out "vllm=$OUT/bfcl/vllm.json"
run "$MAIN_PYTHON" "${STAGE[@]}" generate_bfcl --in "model=$TRAIN/final" --in "vllm=$OUT/bfcl/vllm.json" \
  --config "$BFCL_CONFIG" --seed eval=0 --option threads=1 --option gpu_memory_utilization=0.8 --gpus 1 --cuda "$CUDA" \
  --out "results=$OUT/bfcl/raw/seed0"
run "$MAIN_PYTHON" "${STAGE[@]}" score_bfcl --in "results=$OUT/bfcl/raw/seed0" \
  --config "{\"protocol\": $PROTOCOL}" --seed eval=0 --out "score=$OUT/bfcl/seed0.json"
check "$MAIN_PYTHON" "BFCL: 5 entries scored, zero inference errors" "
import json
doc = json.load(open('$OUT/bfcl/seed0.json'))
cat = doc['categories']['simple_python']
assert doc['summary']['inference_errors'] == 0, doc['summary']
print('simple_python:', cat)
"

echo "== 3. lm-eval, 50 HellaSwag documents (vLLM backend)"
run "$VERL_PYTHON" "${STAGE[@]}" check_general_capability --in "model=$TRAIN/final" \
  --config '{"general": {"tasks": "hellaswag", "num_fewshot": 0, "limit": 50}}' --seed eval=0 \
  --option backend=vllm --out "summary=$OUT/general/summary.json"
check "$VERL_PYTHON" "lm-eval: 50 documents" "
import json
rows = json.load(open('$OUT/general/summary.json'))['results']
assert rows and all(r['n_samples'] == 50 for r in rows), rows
print(rows)
"
echo "== gpu_smoke.sh: all checks passed in $(( $(date +%s) - START )) s (outputs in $OUT)"
