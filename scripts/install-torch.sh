#!/usr/bin/env bash
# Install a lock's torch==<version>+cpu entry alone, before the rest of the lock (scripts/install-from-lock.sh).
# That build is not on PyPI but on PyTorch's CPU index; only this entry ever asks that index (pip would
# otherwise ask it about every package of the lock: slow, and minutes of retries where it is unreachable).
#   1. torch already installed at the lock's version: nothing to do (idempotent, no pip run).
#   2. pip as configured, no index option (--require-hashes --no-deps): here it finds the wheel in
#      /opt/wheels (pip config find-links), and a folder named by PIP_FIND_LINKS works the same. Why pip
#      itself rather than a guess at where it looks (find-links, file:// indexes, a proxy): only pip knows its
#      configuration. Whatever else stops it (no such file where it looks: "No matching distribution"; a
#      resolver refusal, "ResolutionImpossible"; a wording of a later pip), step 3 follows, pip's message
#      shown. The one failure that stops here is a file whose sha256 is not the lock's ("DO NOT MATCH THE
#      HASHES"): a wheel found but refused is not a reason to download another.
#   3. the entry alone from PyTorch's CPU index, TORCH_INDEX_URL or else https://download.pytorch.org/whl/cpu,
#      as pip's --index-url (PyPI was asked in step 2), hash-checked, --timeout 15 --retries 1: an unreachable
#      index fails in seconds (~30 s where packets are dropped), with one message naming it and what to set.
# A user-set TORCH_INDEX_URL (a mirror of that index) skips step 2. In both steps a pip constraint file
# (PIP_CONSTRAINT, pip.conf's `constraint`, as this machine's system-wide configuration has) is set aside
# for this one entry (PIP_CONSTRAINT=/dev/null, an empty one in its place): the lock pins torch by version
# and sha256, so a constraint can only refuse that file (pip 23's resolver said ResolutionImpossible to
# `torch<=2.14.1` against 2.13.0+cpu), never choose another.
#   scripts/install-torch.sh PYTHON LOCK
set -euo pipefail
if [ $# != 2 ]; then
  echo "usage: $0 PYTHON LOCK" >&2
  exit 2
fi
PY=$1
LOCK=$2
PIN=$(grep -o '^torch==[^ ]*+cpu' "$LOCK" || true)
[ -n "$PIN" ] || exit 0 # no CPU build pinned: the rest of the lock installs torch from PyPI
VERSION=${PIN#torch==}
if "$PY" -c 'import importlib.metadata as m, sys; sys.exit(m.version("torch") != sys.argv[1])' "$VERSION" 2>/dev/null; then
  exit 0
fi
DEFAULT_INDEX=https://download.pytorch.org/whl/cpu
INDEX=${TORCH_INDEX_URL:-$DEFAULT_INDEX}
# entries REGEX: the lock's entries whose line matches REGEX, with their hashes
entries() { awk -v re="$1" '/^[^ #]/ { keep = ($0 ~ re) } keep' "$LOCK"; }
FIRST=$(mktemp)
ERR=$(mktemp)
trap 'rm -f "$FIRST" "$ERR"' EXIT
entries '^torch==' >"$FIRST"
HASHES="DO NOT MATCH THE HASHES" # pip's words for a file whose sha256 is not the lock's
pip_entry() { PIP_CONSTRAINT=/dev/null "$PY" -m pip install -q --disable-pip-version-check --require-hashes --no-deps "$@" -r "$FIRST" 2>"$ERR"; }
if [ -z "${TORCH_INDEX_URL:-}" ]; then
  if pip_entry; then
    cat "$ERR" >&2
    exit 0
  fi
  if grep -q "$HASHES" "$ERR"; then
    cat "$ERR" >&2
    echo "$0: could not install $PIN ($LOCK): see the message above" >&2
    exit 1
  fi
  sed 's/^/  pip: /' "$ERR" >&2
  echo "$0: $PIN is not where pip looks (PyPI has no +cpu builds; pip's words above): trying $INDEX" >&2
fi
if pip_entry --index-url "$INDEX" --timeout 15 --retries 1; then
  cat "$ERR" >&2
  exit 0
fi
cat "$ERR" >&2
if grep -q "$HASHES" "$ERR"; then
  echo "$0: could not install $PIN ($LOCK) from $INDEX: see the message above" >&2
  exit 1
fi
echo "$0: could not install $PIN ($LOCK): $INDEX was unreachable or has no file of it for this Python." >&2
echo "  Rerun the install with TORCH_INDEX_URL set to a mirror of PyTorch's CPU index, or PIP_FIND_LINKS to a" >&2
echo "  folder holding the wheel: e.g. TORCH_INDEX_URL=https://<mirror>/whl/cpu bash scripts/install.sh" >&2
exit 1
