#!/usr/bin/env bash
# Snakemake's head as a small, long SLURM job, so that a dropped ssh session, a rebooted login node or a
# second Ctrl-C costs nothing (docs/cluster.md, "The head on the cluster").
#   scripts/cluster-head.sh [SNAKEMAKE ARGS...]          e.g. scripts/cluster-head.sh --configfile config/paper.yaml
#   make cluster-head ARGS="--configfile config/paper.yaml"
# It submits one job (1 CPU, HEAD_MEM, HEAD_TIME) from this folder, which, on its node:
#   1. takes the head's own lease, .snakemake/toolcall-head.json (toolcall_repro.lease): a head that still
#      runs (squeue has its job) stops this one with a line naming it; a gone head's is taken over;
#   2. clears the lock a killed head left (snakemake --unlock: safe now that no other head is alive);
#   3. waits while jobs of an earlier head still write their outputs (their leases: `toolcall-repro leases
#      --wait`), instead of starting them again beside them; at most HEAD_WAIT_S;
#   4. runs snakemake --profile $PROFILE --rerun-incomplete ARGS, which submits every rule's job as usual.
# Prints the job id and the log. Follow: tail -f <log>. Stop: scancel --batch --signal=INT <job id>: Snakemake
# cancels the jobs it submitted and ends. A plain scancel sends SIGTERM, on which Snakemake submits nothing
# more and waits for its running jobs until SLURM kills it (KillWait); they run on, and their leases keep a
# later head from starting them again beside them. A restarted head is the same command.
# Env: HEAD_TIME (sbatch --time; unset: the partition's default: set it to what your partition allows, as
# long as the run, or restart the head when it ends), HEAD_MEM (4G), HEAD_PARTITION, HEAD_ACCOUNT (sbatch -p / -A; unset: the
# site's defaults), HEAD_LOG_DIR (logs/head), HEAD_WAIT_S (86400), PROFILE (profiles/slurm),
# HEAD_PYTHON (.venv/bin/python where it exists, else python: the interpreter with this package and
# Snakemake), HEAD_SBATCH_ARGS (more sbatch options, split on spaces).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${HEAD_PYTHON:-$([ -x .venv/bin/python ] && echo "$PWD/.venv/bin/python" || echo python)}
LOG_DIR=${HEAD_LOG_DIR:-logs/head}
mkdir -p "$LOG_DIR" .snakemake
args=$(printf '%q ' "$@")
opts=(--job-name toolcall-head --cpus-per-task 1 --ntasks 1 --mem "${HEAD_MEM:-4G}" --output "$LOG_DIR/head-%j.log"
  --chdir "$PWD")
[ -n "${HEAD_TIME:-}" ] && opts+=(--time "$HEAD_TIME")
[ -n "${HEAD_PARTITION:-}" ] && opts+=(--partition "$HEAD_PARTITION")
[ -n "${HEAD_ACCOUNT:-}" ] && opts+=(--account "$HEAD_ACCOUNT")
# shellcheck disable=SC2206
[ -n "${HEAD_SBATCH_ARGS:-}" ] && opts+=($HEAD_SBATCH_ARGS)
job=$(sbatch --parsable "${opts[@]}" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
echo "snakemake head: SLURM job \$SLURM_JOB_ID on \$(hostname), \$(date)"
"$PY" -m toolcall_repro.cli leases --head .snakemake/toolcall-head.json
"$PY" -m snakemake --profile "${PROFILE:-profiles/slurm}" --unlock $args
"$PY" -m toolcall_repro.cli leases --wait "${HEAD_WAIT_S:-86400}" results
# in the foreground, as the batch shell itself: a background child of a non-interactive shell ignores
# SIGINT, and Snakemake cancels the jobs it submitted on SIGINT only (SIGTERM: it waits for them)
exec "$PY" -m snakemake --profile "${PROFILE:-profiles/slurm}" --rerun-incomplete $args
SCRIPT
)
job=${job%%;*}
echo "cluster-head: Snakemake's head is SLURM job $job"
echo "  log:    $LOG_DIR/head-$job.log   (tail -f it to follow)"
echo "  stop:   scancel --batch --signal=INT $job   (Snakemake cancels the jobs it submitted, then ends)"
echo "  status: squeue -j $job; its jobs: squeue --me"
sleep 2
reason=$(squeue -h -j "$job" -o %r 2>/dev/null || true)
case "$reason" in
  *TimeLimit*) echo "cluster-head: job $job waits for ever: $reason (HEAD_TIME=${HEAD_TIME:-unset} is over the partition's limit; scancel $job and set HEAD_TIME)" >&2 ;;
esac
