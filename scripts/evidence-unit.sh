#!/usr/bin/env bash
# `make evidence-unit`: run the next seed-pair unit of the efficiency evidence (docs/efficiency.md,
# "Pre-registration 3") from this checkout, check it and put it under docs/evidence/units/, then stop.
#  1. `toolcall-repro evidence-unit next`: the first pre-registered unit (multi-turn seeds 0-4, then
#     single-turn 0-4) whose folder is not committed; none left: says so and exits 0.
#  2. Snakemake builds that unit's folder in results/evidence/: the data, the warm start, the setting's
#     filter and held-out split (this machine's own), both trainings side by side, then the `evidence_unit`
#     job (the pair's analysis inputs and unit.json: every job's digests, the machine, the jobs' times).
#  3. `toolcall-repro evidence-unit finish`: the lease's wall time into unit.json, the check, one rename
#     into docs/evidence/units/<unit>: a unit killed before this leaves nothing there, and is rerun whole.
# Then commit the folder at once (git add docs/evidence/units/<unit>): the machine may be gone next time.
# Runs in any checkout, best a `git worktree` of a committed state of its own (the unit records the commit).
# CORES (default 2) is Snakemake's --cores; the jobs' thread counts are config (the bytes never depend on it).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=config/evidence.yaml
UNITS=docs/evidence/units
PY=.venv/bin/python
started=$(date +%s)
set +e
line=$("$PY" -m toolcall_repro.cli evidence-unit next --configfile "$CONFIG" --units "$UNITS")
rc=$?
set -e
if [ "$rc" = 3 ]; then
  echo "evidence-unit: every pre-registered unit is committed; toolcall-repro evidence-rebuild docs/evidence OUT gives the result"
  exit 0
fi
[ "$rc" = 0 ] || exit "$rc"
read -r name setting seed target <<<"$line"
echo "evidence-unit: $name ($setting, seed $seed) -> $target, on $("$PY" -c 'from toolcall_repro.machine import cpu_model; print(cpu_model())')"
PATH="$PWD/.venv/bin:$PATH" .venv/bin/snakemake "$target" --cores "${CORES:-2}" --rerun-incomplete --configfile "$CONFIG"
"$PY" -m toolcall_repro.cli evidence-unit finish "$target" --units "$UNITS" --started "$started"
echo "evidence-unit: now commit it: git add $UNITS/$name && git commit -m 'Evidence unit $name'"
