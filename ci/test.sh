#!/usr/bin/env bash
# Lint, then the test suite, with the venv's tools first on PATH (horovodrun, mpirun wrappers,
# hvd-linreg). Extra arguments go to pytest, e.g. `bash ci/test.sh -m "not multiprocess"`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH=$venv/bin:$PATH
cd "$repo"
ruff check .
ruff format --check .
exec python -m pytest -ra "$@"
