#!/usr/bin/env bash
# Snakemake runs this in the new env (activated) once conda has installed eval-vllm-cu12.yaml's pip section, the
# hash-checked requirements/eval-vllm-cu12.lock: it installs this package itself (--no-deps --no-build-isolation: hash-
# checking mode allows no editable requirement beside the lock) and writes the lock marker the manifests
# read ($CONDA_PREFIX/toolcall-repro-lock.json). Snakemake runs a copy, .snakemake/conda/<hash>.post-deploy.sh,
# so `../..` is the working directory, the checkout, as in the env file's pip section.
set -euo pipefail
exec bash "$(dirname "$0")/../../scripts/install-from-lock.sh" --package-only python eval-vllm-cu12
