#!/usr/bin/env bash
# Lint, then the test suite, with the venv's tools first on PATH (horovodrun, mpirun wrappers,
# hvd-linreg). Extra arguments go to pytest, e.g. `bash ci/test.sh -m "not multiprocess"`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH=$venv/bin:$PATH
cd "$repo"
# In CI (as root with apt-get), or when asked, start a one-node SLURM for tests/test_slurm.py.
# In CI a SLURM that cannot start fails the run (else the SLURM promise would go untested
# without anyone noticing); elsewhere that test skips with the reason.
if { [ -n "${CI:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; } ||
  [ "${HVD_LINREG_SLURM:-}" = 1 ]; then
  if ! bash ci/slurm.sh; then
    if [ -n "${CI:-}" ]; then
      echo "error: ci/slurm.sh failed (above): CI must run tests/test_slurm.py" >&2
      exit 1
    fi
    echo "warning: ci/slurm.sh failed; tests/test_slurm.py will skip" >&2
  fi
fi
ruff check .
ruff format --check .
exec python -m pytest -ra "$@"
