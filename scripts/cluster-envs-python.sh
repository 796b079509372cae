#!/usr/bin/env bash
# The `python` of the venv deployment (docs/cluster.md, "The environments"): scripts/install-cluster-envs.sh
# copies it to PREFIX/bin/python, which `. PREFIX/env.sh` puts first on PATH. Why: every rule's body is
# `python -m toolcall_repro.job SPEC FILES` (workflow/rules/common.smk). Where Snakemake deploys conda envs,
# each rule runs in the env of its `conda:` file; without conda the same locks are two venvs, so each job
# is sent to one of them by its rule:
#   PREFIX/verl  verl and vLLM (requirements/train-verl.lock, or train-verl-cu12.lock with engines.cuda: 12:
#                install-cluster-envs.sh --gpu --cuda 12): the rules whose env is train-verl.yaml or
#                eval-vllm.yaml (or their -cu12 twins) at paper scale
#   PREFIX/main  requirements/main.lock (bfcl-eval included): every other rule (cpu.yaml, eval-bfcl.yaml),
#                and any call that is not a job (no SPEC)
# Which is the job sheet's (src/toolcall_repro/sheet.py, venv_of: the env of the spec's rule, a `use rule X
# as Y` twin's own, else its stage's); tests/cluster/test_venv_deployment.py holds it to the workflow's
# conda directives.
set -euo pipefail
PREFIX=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENV=main
if [ "$#" -ge 3 ] && [ "$1" = -m ] && [ "$2" = toolcall_repro.job ]; then
  ENV=$("$PREFIX/main/bin/python" -m toolcall_repro.sheet venv "$3")
fi
exec "$PREFIX/$ENV/bin/python" "$@"
