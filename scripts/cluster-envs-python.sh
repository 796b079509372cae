#!/usr/bin/env bash
# The `python` of the venv deployment (docs/cluster.md, "The environments"): scripts/install-cluster-envs.sh
# copies it to PREFIX/bin/python, which `. PREFIX/env.sh` puts first on PATH. Why: every rule's body is
# `python -m toolcall_repro.job SPEC FILES` (workflow/rules/common.smk). Where Snakemake deploys conda envs,
# each rule runs in the env of its `conda:` file; without conda the same locks are two venvs, so each job
# is sent to one of them by its rule:
#   PREFIX/verl  verl and vLLM (requirements/train-verl.lock, or train-verl-cu12.lock with engines.cuda: 12:
#                install-cluster-envs.sh --gpu --cuda 12): the rules whose env is train-verl.yaml or
#                eval-vllm.yaml (or their -cu12 twins) at paper scale, VERL_RULES below
#   PREFIX/main  requirements/main.lock (bfcl-eval included): every other rule (cpu.yaml, eval-bfcl.yaml),
#                and any call that is not a job (no SPEC)
# The rule is the spec's "rule" (a `use rule X as Y` twin), else its "stage". VERL_RULES is held to the
# workflow's conda directives by tests/cluster/test_venv_deployment.py.
set -euo pipefail
PREFIX=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERL_RULES=" filter_single_turn filter_multi_turn train_grpo train_grpo_seed locate_vllm score_heldout score_acebench check_general_capability "
ENV=main
if [ "$#" -ge 3 ] && [ "$1" = -m ] && [ "$2" = toolcall_repro.job ]; then
  RULE=$("$PREFIX/main/bin/python" -c 'import json, sys; s = json.loads(sys.argv[1]); print(s.get("rule") or s["stage"])' "$3")
  case "$VERL_RULES" in *" $RULE "*) ENV=verl ;; esac
fi
exec "$PREFIX/$ENV/bin/python" "$@"
