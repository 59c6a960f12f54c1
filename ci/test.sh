#!/usr/bin/env bash
# Lint, then the test suite, with the venv's tools first on PATH (horovodrun, mpirun wrappers,
# hvd-linreg). Extra arguments go to pytest, e.g. `bash ci/test.sh -m "not multiprocess"`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH=$venv/bin:$PATH
cd "$repo"
# In CI (as root with apt-get), or when asked, start a one-node SLURM for tests/test_slurm.py.
# If it cannot start, that test skips: SLURM is not worth failing the whole suite over.
if { [ -n "${CI:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; } ||
  [ "${HVD_LINREG_SLURM:-}" = 1 ]; then
  bash ci/slurm.sh || echo "warning: ci/slurm.sh failed; tests/test_slurm.py will skip" >&2
fi
ruff check .
ruff format --check .
# tests/test_multihost.py brings up ci/cluster.sh's hosts and takes them down itself; should
# pytest be killed before its clean-up runs, take them down here (root only: only root has them).
if [ "$(id -u)" = 0 ]; then
  trap 'bash ci/cluster.sh down' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
fi
python -m pytest -ra "$@"
