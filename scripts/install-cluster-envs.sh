#!/usr/bin/env bash
# The per-rule environments of a SLURM run without conda (`make cluster-envs PREFIX=...`): the locked venvs,
# built once from the same locks as the conda envs, on a filesystem every node sees, and what picks one per
# job. Why: `--sdm conda` needs conda on the submit host and builds four envs per checkout; a cluster with
# neither, or with venvs already built, runs the same rules from these (docs/cluster.md, "The environments").
#   bash scripts/install-cluster-envs.sh PREFIX [--gpu [--cuda 13|12]]   build, or bring up to date
#                                              (idempotent); --cuda 12: the CUDA 12 lock (engines.cuda: 12)
#   bash scripts/install-cluster-envs.sh PREFIX --link MAIN_VENV VERL_VENV   use venvs built already (e.g.
#                                              .venv and .venv-verl of `make install install-verl`): links
# It makes
#   PREFIX/main        requirements/main.lock (scripts/install-from-lock.sh, as .venv): Snakemake and its
#                      slurm plugins, the CPU rules, bfcl-eval
#   PREFIX/verl        requirements/train-verl.lock with --gpu (scripts/install-verl-env.sh --gpu; CUDA 13,
#                      driver >= 580), train-verl-cu12.lock with --gpu --cuda 12 (CUDA 12.8, driver >= 525),
#                      else requirements/verl-cpu.lock (verl and vLLM on CPUs)
#   PREFIX/bin/python  scripts/cluster-envs-python.sh: sends each job to PREFIX/verl or PREFIX/main by rule
#   PREFIX/env.sh      TOOLCALL_ENVS, PATH (PREFIX/bin, then PREFIX/main/bin), VERL_PYTHON, VLLM_BIN
# then:  . PREFIX/env.sh && snakemake --profile profiles/slurm-venv
# Both venvs install this checkout editable (-e .): it must stay where it is, on the shared filesystem
# (it is there already: Ray's workers import it and the results tree lives in it).
set -euo pipefail
cd "$(dirname "$0")/.."
USAGE="usage: $0 PREFIX [--gpu [--cuda 13|12]] | PREFIX --link MAIN_VENV VERL_VENV"
[ $# -ge 1 ] || { echo "$USAGE" >&2; exit 2; }
PREFIX=$(realpath -m "$1")
shift
PYTHON=${PYTHON:-python3}
mkdir -p "$PREFIX/bin"
case "${1:-}" in
  --link)
    [ $# = 3 ] || { echo "usage: $0 PREFIX --link MAIN_VENV VERL_VENV" >&2; exit 2; }
    for pair in "main:$2" "verl:$3"; do
      name=${pair%%:*} venv=$(realpath "${pair#*:}")
      [ -x "$venv/bin/python" ] || { echo "$0: no venv at $venv" >&2; exit 1; }
      if [ -e "$PREFIX/$name" ] && [ ! -L "$PREFIX/$name" ]; then
        echo "$0: $PREFIX/$name exists and is no link" >&2; exit 1
      fi
      ln -sfn "$venv" "$PREFIX/$name"
    done
    ;;
  "" | --gpu)
    # checked before main is built: --cuda goes with --gpu, and names a major that has a lock
    case "$*" in
      "" | --gpu | "--gpu --cuda 13" | "--gpu --cuda 12") ;;
      *) echo "$USAGE" >&2; exit 2 ;;
    esac
    [ -x "$PREFIX/main/bin/python" ] || "$PYTHON" -m venv "$PREFIX/main"
    bash scripts/install-from-lock.sh "$PREFIX/main/bin/python" main
    VERL_VENV=$PREFIX/verl PYTHON=$PYTHON bash scripts/install-verl-env.sh "$@"
    ;;
  *) echo "$USAGE" >&2; exit 2 ;;
esac
cp scripts/cluster-envs-python.sh "$PREFIX/bin/python"
chmod 755 "$PREFIX/bin/python"
cat > "$PREFIX/env.sh" <<ENV
# written by scripts/install-cluster-envs.sh: source it before \`snakemake --profile profiles/slurm-venv\`
export TOOLCALL_ENVS=$PREFIX
export PATH=$PREFIX/bin:$PREFIX/main/bin:\$PATH
export VERL_PYTHON=$PREFIX/verl/bin/python
export VLLM_BIN=$PREFIX/verl/bin/vllm
ENV
"$PREFIX/main/bin/python" -c "import snakemake, bfcl_eval, toolcall_repro; print('main: snakemake', snakemake.__version__)"
"$PREFIX/verl/bin/python" -c "import verl, vllm, toolcall_repro; print('verl:', verl.__version__, '| vllm', vllm.__version__)"
echo "$PREFIX ready: . $PREFIX/env.sh && snakemake --profile profiles/slurm-venv"
