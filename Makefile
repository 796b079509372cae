# The two entry points of the README. Both install what they need first (idempotent).
.PHONY: install install-verl lock run evidence evidence-unit test test-fast lint reference

install:
	bash scripts/install.sh

install-verl:
	bash scripts/install-verl-env.sh

# The per-rule environments of a SLURM run without conda: the main and verl venvs from the locks, on a filesystem
# every node sees, and PREFIX/env.sh to source before `snakemake --profile profiles/slurm-venv` (docs/cluster.md,
# "The environments"). GPU=0 builds verl's CPU lock instead of the GPU one (a CPU-only trial, the local SLURM);
# CUDA=12 the CUDA 12 GPU lock, for nodes whose NVIDIA driver is older than 580 (the config's engines.cuda: 12).
.PHONY: cluster-envs
PREFIX ?=
GPU ?= 1
CUDA ?=
cluster-envs:
	@[ -n "$(PREFIX)" ] || { echo "usage: make cluster-envs PREFIX=/shared/path [GPU=0] [CUDA=12]" >&2; exit 2; }
	bash scripts/install-cluster-envs.sh "$(PREFIX)" $(if $(filter 1,$(GPU)),--gpu $(if $(CUDA),--cuda $(CUDA)))

# Snakemake's head as a small, long SLURM job (docs/cluster.md, "The head on the cluster"): a dropped login
# session costs nothing; a restarted head waits for its predecessor's running jobs. ARGS: Snakemake's.
.PHONY: cluster-head
ARGS ?=
cluster-head:
	bash scripts/cluster-head.sh $(ARGS)

# Regenerate requirements/*.lock from requirements/*.in (needs uv and PyPI; installs read only the locks).
lock:
	bash scripts/lock.sh

# The embedded default, end to end on the local cores, no network.
# Jobs call `python -m toolcall_repro ...`, so the venv's bin goes first on PATH.
# RUN_CONFIG=<file> runs another complete config the same way (CI: .test/config.yaml, see .ci/run).
# CORES: Snakemake's --cores, every core of the machine unless set; the jobs' thread counts are config
# (engines.threads, engines.warmstart_threads), so the bytes do not depend on it.
RUN_CONFIG ?=
CORES ?= $(shell nproc 2>/dev/null || echo 2)
run: install
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/snakemake --cores $(CORES) $(if $(RUN_CONFIG),--configfile $(RUN_CONFIG))

# The efficiency evidence, pre-registered in docs/efficiency.md ("Pre-registration 2"): 20 trainings, ~24 CPU-h
# of jobs predicted, ~12 h on an idle 2-core machine, multi-turn's 10 trainings first (~7.5 h with the upstream).
# Rerun after a stop: finished jobs are kept, an interrupted training continues from its last checkpoint
# (after a kill, first clear Snakemake's lock: .venv/bin/snakemake efficiency --configfile config/evidence.yaml --unlock).
EVIDENCE_FIRST = $(foreach v,vanilla efficient,results/evidence/train/multi_turn/$(v)/summary.json \
	$(foreach k,1 2 3 4,results/evidence/train/multi_turn/$(v)/seed$(k)/summary.json))
evidence: install
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/snakemake efficiency --cores $(CORES) --rerun-incomplete --prioritize $(EVIDENCE_FIRST) --configfile config/evidence.yaml

# One seed-pair unit of the evidence (docs/efficiency.md, "Pre-registration 3"): the first pre-registered unit not
# committed under docs/evidence/units/, from this machine's own upstream, checked and put in place; then commit it.
evidence-unit: install
	CORES=$(CORES) bash scripts/evidence-unit.sh

# Every test: the main suite in .venv, then the verl CPU tests in .venv-verl.
test: install install-verl
	bash scripts/test.sh

# The fast loop: the unit tests of .venv (after `make install`), without the workflow, end-to-end, toy paper,
# slow and verl tests: pytest -m "not workflow and not slow and not verl" (scripts/test.sh fast), on every core
# (pytest-xdist; TEST_WORKERS=N sets the number of worker processes).
test-fast:
	bash scripts/test.sh fast

lint:
	.venv/bin/ruff check src tests benchmarks scripts
	.venv/bin/snakefmt --check workflow/
	.venv/bin/snakemake --lint

# Rewrite the CI-size run's reference digests from results/ci-smoke (after `make run RUN_CONFIG=.test/config.yaml`):
# .test/expected/digests/mkl-<branch>.json, the file of the MKL branch this machine runs (Intel: avx2, others: auto).
# A deliberate step: commit it with the change that moved the numbers, say which numbers moved, and rewrite
# the other branch's file on such a machine (or say it is stale).
reference:
	.venv/bin/toolcall-repro digests results/ci-smoke --write .test/expected/digests/
